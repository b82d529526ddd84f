"""A model on a server the person added: "loaded" once the server answers and has it; answers streamed from it.

Nothing runs here: the server writes the answer, and this backend passes its pieces on as the local
backends pass theirs (text, thinking, whole tool calls, then Done with the stats). Stop hangs up
the connection at once, even while the server is silent. The server's list and keys are read from
the files the person's Kestrel keeps (app/library/servers/), so a server no one added is never
contacted, whoever asked.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from app.core.answer_stats import AnswerStats, FinishReason
from app.core.paths import data_paths
from app.engine.answers.answer_common import AnswerTiming
from app.engine.answers.answer_shape import new_call_id
from app.engine.backends.remote import anthropic_chat, ollama_chat, openai_chat
from app.engine.backends.remote.streamed import Asked, Called, Ended, Fault, Piece, Said
from app.engine.control import GenerationControl
from app.engine.errors import ImageRefused, ModelLoadError, ServerFailedError
from app.engine.failures import NoBackend, NoVision, ServerFailed
from app.engine.protocol import ChatMessage, Delta, Done, Generate, Load, Loaded, ToolCall
from app.library.servers.faults import ServerFacts, ServerFault, ServerTrouble
from app.library.servers.keys import ServerKeys, keys_file
from app.library.servers.listing import find_model
from app.library.servers.records import AddedServer, ModelAbility, RemoteModel, ServerKind, parse_address
from app.library.servers.server_list import ServerList, servers_file
from app.library.servers.wire import Asking, Exchange, HangUp, send

CHAT_FORMAT = "the server's own"
# How each API's stream is read (OpenAI's for the kinds that speak it).
_READERS: dict[ServerKind, Callable[[Iterator[bytes], Fault], Iterator[Piece]]] = {
    ServerKind.OLLAMA: ollama_chat.read, ServerKind.ANTHROPIC: anthropic_chat.read}
HANG_UP_POLL_S = 0.05  # how often a running answer looks for Stop while the server is silent


class RemoteBackend:
    """One model on one added server."""

    def __init__(self, loaded: Loaded, server: AddedServer, key: str | None, model: RemoteModel) -> None:
        self.loaded = loaded
        self._server = server
        self._key = key
        self._model = model

    @classmethod
    def open(cls, request: Load) -> RemoteBackend:
        """Check that the server answers and has the model; ModelLoadError (ServerFailed) in its words if not."""
        started = time.perf_counter()
        parsed = parse_address(request.model_path)
        if parsed is None:
            raise ModelLoadError(NoBackend(request.model_path))
        name, model_name = parsed
        paths = data_paths()
        server = ServerList(servers_file(paths)).get(name)
        if server is None:
            raise ModelLoadError(ServerFailed(ServerFacts(name, "", ServerTrouble.NOT_ADDED, model=model_name)))
        key = ServerKeys(keys_file(paths)).get(server.name)
        try:
            model = find_model(server, key, model_name)
        except ServerFault as fault:
            raise ModelLoadError(ServerFailed(fault.facts)) from None
        context = min(request.context_length, model.context_length or request.context_length)
        thinks = ModelAbility.THINKING in model.abilities
        sees = ModelAbility.VISION in model.abilities
        loaded = Loaded(request_id=request.request_id, model_path=request.model_path,
                        load_ms=round((time.perf_counter() - started) * 1000, 2),
                        device=f"{server.name} ({server.host})", context_length=context, threads=0,
                        architecture="remote", chat_format=CHAT_FORMAT,
                        placement_reason=f"{model.name} runs on {server.name} ({server.url}), a server you added",
                        thinks=thinks, thinking_switch=thinks and server.kind == ServerKind.OLLAMA,
                        # A server that does not say what its models do (OpenAI-style ones) is asked; it says if
                        # it cannot. Images are sent only where the server (or the person) says they are taken.
                        calls_tools=ModelAbility.TOOLS in model.abilities or not model.abilities_known,
                        vision=sees, vision_problem="" if sees else
                        f"{server.name} does not say that {model.name} takes images.")
        return cls(loaded, server, key, model)

    def generate(self, request: Generate, control: GenerationControl) -> Iterator[Delta | Done]:
        """Stream the server's answer; a fault ends it with ServerFailedError after what was streamed."""
        if not self.loaded.vision and any(message.images for message in request.messages):
            raise ImageRefused(NoVision(f"{self._model.name} on {self._server.name}", self.loaded.vision_problem))
        timing = AnswerTiming()
        asking = Asking(self._server, self._key, self._server.wait_s, model=self._model.name)
        ask = self._asked(request)
        hang_up, finished = HangUp(), threading.Event()
        threading.Thread(target=_hang_up_on_stop, args=(control, hang_up, finished), name="remote-hang-up",
                         daemon=True).start()
        ended: Ended | None = None
        finish = FinishReason.STOP
        calls = 0
        exchange: Exchange | None = None
        try:
            exchange = send(asking, "POST", ask.path, ask.body, missing=ServerTrouble.MODEL_GONE, hang_up=hang_up)
            read = _READERS.get(self._server.kind, openai_chat.read)
            pieces = read(exchange.lines(), lambda trouble, detail: asking.fault(trouble, detail=detail))
            for piece in _until_stopped(pieces, control):
                if isinstance(piece, Ended):
                    ended, finish = piece, piece.finish
                elif isinstance(piece, Called):
                    yield Delta(request.request_id, "", tool_call=ToolCall(calls, piece.id or new_call_id(),
                                                                           piece.name, piece.arguments))
                    calls += 1
                else:
                    _time(timing, piece)
                    yield Delta(request.request_id, piece.text, thinking=piece.thinking)
            if control.cancelled and ended is None:
                finish = FinishReason.CANCELLED
        except ServerFault as fault:
            if not control.cancelled:
                raise ServerFailedError(ServerFailed(fault.facts)) from None
            finish = FinishReason.CANCELLED  # the hang-up cut the stream: no fault of the server's
        finally:
            finished.set()
            if exchange is not None:
                exchange.close()
        yield Done(request.request_id, self._stats(request, timing, ended, finish))

    def _asked(self, request: Generate) -> Asked:
        """The request in the server's API: Ollama's takes the chat's context and thinking switch too."""
        kind = self._server.kind
        if kind == ServerKind.OLLAMA:
            return ollama_chat.asked(request, self._model.name, context_length=self.loaded.context_length,
                                     thinks=self.loaded.thinking_switch)
        if kind == ServerKind.ANTHROPIC:
            return anthropic_chat.asked(request, self._model.name)
        return openai_chat.asked(request, self._model.name)

    def _stats(self, request: Generate, timing: AnswerTiming, ended: Ended | None, finish: FinishReason) -> AnswerStats:
        """The answer's stats: the server's counts and speed where it gave them, else Kestrel's (a streamed
        piece counted as a token, the prompt estimated)."""
        prompt = ended.prompt_tokens if ended is not None and ended.prompt_tokens is not None else \
            self.count_prompt(request.messages, request.settings.thinking)
        stats = dataclasses.replace(timing.stats(prompt_tokens=prompt, device=self.loaded.device, finish=finish,
                                                 chat_format=CHAT_FORMAT, left_out=0), server=self._server.name)
        if ended is None:
            return stats
        tokens = ended.tokens if ended.tokens is not None else stats.tokens
        speed = ended.tokens_per_s
        if speed is None and tokens > 1 and timing.first is not None and timing.last is not None \
                and timing.last > timing.first:
            speed = round((tokens - 1) / (timing.last - timing.first), 2)
        return dataclasses.replace(stats, tokens=tokens, tokens_per_s=speed or stats.tokens_per_s,
                                   prompt_tokens_evaluated=prompt if ended.prompt_tokens is not None else 0)

    def count_tokens(self, text: str) -> int:
        """An estimate: the server's tokenizer is not here (about four bytes of text a token)."""
        return (len(text.encode("utf-8")) + 3) // 4

    def count_prompt(self, messages: Sequence[ChatMessage], thinking: bool) -> int:
        """An estimate as count_tokens, with a few tokens for each turn's markers."""
        return sum(self.count_tokens(m.content) + 4 for m in messages)

    def reset(self) -> None:
        """The server keeps its own cache."""

    def close(self) -> None:
        """Nothing is held: each answer opens its own connection."""

    def forget_states(self) -> None:
        """No states are saved here."""


def _until_stopped(pieces: Iterator[Piece], control: GenerationControl) -> Iterator[Piece]:
    """The pieces until Stop, which is looked at between two of them; a pause holds them."""
    for piece in pieces:
        if control.cancelled:
            return
        control.wait_while_paused()
        yield piece


def _time(timing: AnswerTiming, piece: Said) -> None:
    now = time.perf_counter()
    timing.first = timing.first or now
    timing.last = now
    timing.generated += 1
    if piece.thinking:
        timing.thinking_from = timing.thinking_from or now
    elif timing.thinking_from is not None and timing.thinking_to is None:
        timing.thinking_to = now


def _hang_up_on_stop(control: GenerationControl, hang_up: HangUp, finished: threading.Event) -> None:
    """Close the connection as soon as Stop comes: a wait on a silent server (for its answer's head, or its next
    word) then ends at once."""
    while not finished.wait(HANG_UP_POLL_S):
        if control.cancelled:
            hang_up.now()
            return
