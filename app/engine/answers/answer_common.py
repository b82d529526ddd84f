"""What every backend shares: fitting a conversation into the context, timing an answer, reading its calls."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Generator, Iterable, Protocol, Sequence

from app.core.answer_stats import AnswerStats, FinishReason
from app.core.conversation import Role
from app.engine.answers.answer_shape import PLAIN, ShapedAnswer, forced_call
from app.engine.answers.answer_text import AnswerText
from app.engine.templates.chat_format import PromptSpec
from app.engine.control import GenerationControl, PromptCancelled
from app.engine.errors import ContextOverflow
from app.engine.protocol import ChatMessage, Delta, Done, Generate, Loaded, ToolCall
from app.engine.answers.thinking import Splitter, ThinkingStyle, answer_stops, splitter_for
from app.engine.tool_calls.tool_calls import ToolCallReader


@dataclass
class AnswerTiming:
    """When an answer started, produced its first and last token, and how many."""

    start: float = field(default_factory=time.perf_counter)
    first: float | None = None
    last: float | None = None
    generated: int = 0
    evaluated: int = 0
    thinking_from: float | None = None
    thinking_to: float | None = None

    def stats(self, *, prompt_tokens: int, device: str, finish: FinishReason, chat_format: str,
              left_out: int, template_note: str = "", threads: int = 0) -> AnswerStats:
        """The stats every backend reports, with the same meaning; `finish` is a
        FinishReason (or its value: a reason it does not name is a bug, ValueError)."""
        first = self.first or time.perf_counter()
        decode_s = (self.last - first) if self.last and self.generated > 1 else 0.0
        return AnswerStats(
            ttft_ms=round((first - self.start) * 1000, 2),
            tokens=self.generated,
            tokens_per_s=round((self.generated - 1) / decode_s, 2) if decode_s > 0 else 0.0,
            prompt_tokens=prompt_tokens,
            prompt_tokens_evaluated=self.evaluated,
            device=device,
            finish_reason=FinishReason(finish),
            chat_format=chat_format,
            total_ms=round((time.perf_counter() - self.start) * 1000, 2),
            messages_left_out=left_out,
            template_note=template_note,
            thinking_ms=self._thinking_ms(),
            threads=threads,
        )

    def _thinking_ms(self) -> float:
        if self.thinking_from is None:
            return 0.0
        return round(((self.thinking_to or self.last or self.thinking_from) - self.thinking_from) * 1000, 2)


class CallWatcher(Protocol):
    """Told what an answer's call reader has read, after each piece and before the backend samples
    the next token (llama.cpp's lazy grammar: app/engine/backends/llama/lazy_grammar.py)."""

    def observe(self, reader: ToolCallReader) -> None: ...


# (prompt, token budget, answer text, timing) -> the deltas, returning the finish reason.
TokenStream = Callable[[list[int], int, AnswerText, AnswerTiming], Generator[Delta, None, FinishReason]]


def answer(request: Generate, loaded: Loaded, *, spec_for: Callable[[Sequence[ChatMessage]], PromptSpec],
           tokenize: Callable[[str], list[int]], stream: TokenStream,
           thinking: ThinkingStyle | None = None, threads: int = 0,
           shaped: ShapedAnswer = PLAIN,
           lazy: CallWatcher | None = None,
           cancelled: Callable[[], bool] | None = None) -> Generator[Delta | Done, None, None]:
    """One answer's life in either backend: fit the prompt, stream, flush the held-back
    tail, report the stats. A backend's stream sets timing.evaluated to the prompt
    tokens it actually evaluated. The context and the device are the loaded model's.
    thinking: how the model writes its thinking (markers or harmony channels,
    app/engine/answers/thinking.py); its thinking then streams as Delta(thinking=True).
    shaped: the answer's tools (app/engine/answers/answer_shape.py); its calls stream as
    Delta(tool_call=...); lazy, when given, is told what the call reader reads (the
    backend's stream switches grammars on its word). A raw prompt (request.shape.prompt) is the prompt as it is: no
    template, no stop strings but the request's, no thinking told apart. cancelled: looked
    at while the prompt is made (spec_for and tokenize may look too, raising
    PromptCancelled); a cancelled answer ends at once with Done, finish CANCELLED."""
    timing = AnswerTiming()
    n_ctx = loaded.context_length
    raw = request.shape.prompt
    try:
        if raw is None:
            spec, prompt, left_out = fit_prompt(request, n_ctx, spec_for, tokenize, cancelled)
        else:
            spec, prompt, left_out, thinking = PromptSpec(raw, "raw", ()), tokenize(raw), 0, None
            if len(prompt) >= n_ctx:
                raise ContextOverflow(len(prompt), n_ctx)
    except PromptCancelled:
        yield Done(request.request_id, timing.stats(prompt_tokens=0, device=loaded.device,
                                                    finish=FinishReason.CANCELLED, chat_format=loaded.chat_format,
                                                    left_out=0, threads=threads))
        return
    budget = min(request.settings.max_tokens, n_ctx - len(prompt))
    text = AnswerText(answer_stops(thinking, spec.stop) + tuple(request.stop), strip_start=raw is None)
    splitter = splitter_for(thinking, spec.text) if thinking else None

    def whole() -> Generator[Delta, None, FinishReason]:
        deltas = stream(prompt, budget, text, timing)
        finish = yield from (_split(deltas, splitter, timing) if splitter else deltas)
        tail = text.finish()
        if splitter is None:
            if tail:
                yield Delta(request.request_id, tail)
        else:
            yield from _parts(request.request_id, splitter.feed(tail) + splitter.finish(), timing)
        return finish

    finish = yield from (_read_calls(request.request_id, whole(), shaped, lazy) if shaped.tools else whole())
    matched = text.stopped_by if text.stopped_by in request.stop else None  # the request's own, not the template's
    yield Done(request.request_id, timing.stats(prompt_tokens=len(prompt), device=loaded.device, finish=finish,
                                                chat_format=spec.chat_format, left_out=left_out,
                                                template_note=spec.note or "", threads=threads), stop_sequence=matched)


def _read_calls(request_id: int, deltas: Generator[Delta, None, FinishReason],
                shaped: ShapedAnswer,
                lazy: CallWatcher | None = None) -> Generator[Delta, None, FinishReason]:
    """The answer's text read for tool calls (thinking is never read): its calls come out
    whole as Delta(tool_call=...), the rest as text. A forced call (shaped.forced) is
    the whole answer: it is held to the end and comes out as one call, or as the text
    it was when it is not one (cut short by the token limit)."""
    reader = shaped.reader()
    held: list[str] = []
    try:
        while True:
            try:
                delta = next(deltas)
            except StopIteration as stop:
                finish: FinishReason = stop.value
                break
            if delta.thinking or not delta.text:
                yield delta
            elif reader is not None:
                pieces = reader.feed(delta.text)
                if lazy is not None:
                    lazy.observe(reader)  # before the backend samples the next token
                yield from _pieces(request_id, pieces)
            else:
                held.append(delta.text)
    finally:
        deltas.close()  # Cancelled: the backend's stream lets go of its tokens.
    if reader is not None:
        yield from _pieces(request_id, reader.finish())
    elif (call := forced_call("".join(held), shaped.names)) is not None:
        yield Delta(request_id, "", tool_call=call)
    elif held:
        yield Delta(request_id, "".join(held))
    return finish


def _pieces(request_id: int, pieces: list[str | ToolCall]) -> Generator[Delta, None, None]:
    for piece in pieces:
        if isinstance(piece, str):
            if piece:
                yield Delta(request_id, piece)
        else:
            yield Delta(request_id, "", tool_call=piece)


def _split(deltas: Generator[Delta, None, FinishReason], splitter: Splitter,
           timing: AnswerTiming) -> Generator[Delta, None, FinishReason]:
    """The deltas with the thinking told apart from the answer; returns the finish reason."""
    try:
        while True:
            try:
                delta = next(deltas)
            except StopIteration as stop:
                return stop.value
            yield from _parts(delta.request_id, splitter.feed(delta.text), timing)
    finally:
        deltas.close()  # Cancelled: the backend's stream lets go of its tokens.


def _parts(request_id: int, parts: list[tuple[bool, str]], timing: AnswerTiming) -> Generator[Delta, None, None]:
    for thinking, text in parts:
        now = time.perf_counter()
        if thinking and timing.thinking_from is None:
            timing.thinking_from = timing.first or now
        elif not thinking and timing.thinking_from is not None and timing.thinking_to is None:
            timing.thinking_to = now
        yield Delta(request_id, text, thinking=thinking)


def fit_prompt(request: Generate, n_ctx: int,
               spec_for: Callable[[Sequence[ChatMessage]], PromptSpec],
               tokenize: Callable[[str], list[int]],
               cancelled: Callable[[], bool] | None = None) -> tuple[PromptSpec, list[int], int]:
    """The prompt, leaving out the oldest turns if asked and needed to leave room.

    Both backends use it: spec_for renders messages, tokenize counts their tokens. The
    fewest turns are left out that leave room for an answer. The search starts from the
    newest turn and doubles the turns it keeps until they no longer fit, then halves the
    gap (an exponential search): each try renders only the turns it keeps, so a chat of
    20,000 messages costs renderings about as long as the context holds, not twelve of
    the whole chat. cancelled: looked at before each try (PromptCancelled).
    """
    room = min(request.settings.max_tokens, max(64, n_ctx // 4))
    messages = list(request.messages)
    system = [m for m in messages if m.role == Role.SYSTEM]
    turns = [m for m in messages if m.role != Role.SYSTEM]
    starts = [i for i, m in enumerate(turns) if m.role == Role.USER] or [0]
    # Where each try begins: 0 keeps every turn, the others begin at a user's turn.
    skips = [0] + starts[1:]

    def attempt(index: int) -> tuple[PromptSpec, list[int], int]:
        if cancelled is not None and cancelled():
            raise PromptCancelled()
        spec = spec_for(system + turns[skips[index]:])
        return spec, tokenize(spec.text), skips[index]

    def fits(candidate: tuple[PromptSpec, list[int], int]) -> bool:
        return len(candidate[1]) + room <= n_ctx

    if not request.trim_history or len(skips) == 1:
        best = attempt(0)
    else:
        good = len(skips) - 1
        best = attempt(good)  # the newest user turn on: when even it has no room, it is the best there is
        bad = -1
        step = 1
        while fits(best) and good > 0:
            candidate = attempt(max(0, good - step))
            if not fits(candidate):
                bad = max(0, good - step)
                break
            best, good = candidate, max(0, good - step)
            step *= 2
        low, high = bad + 1, good - 1
        while fits(best) and low <= high:
            middle = (low + high) // 2
            candidate = attempt(middle)
            if fits(candidate):
                best, high = candidate, middle - 1
            else:
                low = middle + 1
    spec, prompt, left_out = best
    if len(prompt) >= n_ctx:
        raise ContextOverflow(len(prompt), n_ctx)
    return spec, prompt, left_out


def stream_tokens(request_id: int, tokens: Iterable[int], *, is_end: Callable[[int], bool],
                  piece: Callable[[int], bytes], answer: AnswerText, budget: int, finish: FinishReason,
                  control: GenerationControl, timing: AnswerTiming,
                  on_first: Callable[[], None] | None = None) -> Generator[Delta, None, FinishReason]:
    """Turn a backend's tokens into Delta events; returns the finish reason.

    Cancel and pause are looked at between two tokens; the model's end tokens, a stop
    string and the token budget end the answer.
    """
    generated = 0
    try:
        for token in tokens:
            if timing.first is None:
                timing.first = time.perf_counter()
                if on_first is not None:
                    on_first()
            if control.cancelled:
                return FinishReason.CANCELLED
            if is_end(token):
                return FinishReason.STOP
            generated += 1
            timing.last = time.perf_counter()
            text = answer.feed(piece(token))
            if text:
                yield Delta(request_id, text)
            if answer.stopped_by is not None:
                return FinishReason.STOP
            if generated >= budget:
                return finish
            control.wait_while_paused()
        return finish
    finally:
        timing.generated = generated
