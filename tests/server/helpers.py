"""The API server's test helpers: a loop on its own thread (the official clients block), a
started server on an ephemeral loopback port, and a double of ApiAnswers for shape tests."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anthropic
import openai

from app.core.answer_stats import AnswerStats, FinishReason
from app.core.paths import data_paths
from app.core.server_settings import ServerSettings
from app.engine.protocol import Delta, Done, ToolCall
from app.server.runner import ApiServer, ServerState
from app.service.api.api_answers import ApiAnswers, ApiAsk, ApiModel, ApiRefused, EmbeddingAsk, Embeddings, Started
from app.service.api.api_embeddings import ApiEmbeddings, no_embedding_model
from app.service.api.api_voice import ApiVoice
from app.service.events import ModelState, RequestRecord
from app.service.models.engine_handle import EngineHandle
from app.service.root import Service
from tests.helpers.scripted_engine import ScriptedEngine
from tests.service.conftest import SMALL, install, make_service

T = TypeVar("T")
KEY = "kestrel-test-key"
LIMIT_S = 60


class LoopThread:
    """An asyncio loop on a thread of its own, so that the blocking official clients can call
    a server that runs on it; call() runs a coroutine there and waits (bounded)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="api-test-loop", daemon=True)
        self._thread.start()

    def call(self, work: Awaitable[T], timeout: float = LIMIT_S) -> T:
        async def run() -> T:
            return await work

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(LIMIT_S)
        self.loop.close()


@contextmanager
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    try:
        yield thread
    finally:
        thread.close()


@contextmanager
def serving(thread: LoopThread, answers: ApiAnswers, settings: ServerSettings | None = None,
            holder: list[ServerSettings] | None = None) -> Iterator[ApiServer]:
    """A started ApiServer on 127.0.0.1 and a free port; stopped at the end.

    holder: a one-item list whose settings the server reads (a test may replace them)."""
    held = holder if holder is not None else [settings or ServerSettings(port=0, key=KEY)]
    server = thread.call(_make(answers, held))
    assert thread.call(server.start()), server.error
    try:
        yield server
    finally:
        thread.call(server.stop())
        assert server.state is ServerState.OFF


async def _make(answers: ApiAnswers, held: list[ServerSettings]) -> ApiServer:
    return ApiServer(answers, lambda: held[0])


@dataclass
class FakeAnswers:
    """ApiAnswers' interface, answering from a script: for tests of the HTTP layer only (the
    end-to-end tests run the real service). hold: the answer waits after its pieces until
    it is closed; closed counts the answers whose generator was closed. embeddings: the real
    door /v1/embeddings goes through (None: no embedding model, as ApiAnswers without one)."""

    pieces: Sequence[str | ToolCall] = ("Hello", " there", ".")
    thinking: Sequence[str] = ()
    finish: FinishReason = FinishReason.STOP
    refuse: ApiRefused | None = None
    fail_midway: ApiRefused | None = None
    hold: bool = False
    stop_sequence: str | None = None  # the request's stop string that ended the answer
    asks: list[ApiAsk] = field(default_factory=list)
    records: list[RequestRecord] = field(default_factory=list)
    closed: int = 0
    started: int = 0
    embeddings: ApiEmbeddings | None = None
    # The audio endpoints' owners, as the service's ApiAnswers holds them (made for the test's data folder).
    voice: ApiVoice = field(default_factory=lambda: ApiVoice(data_paths().data / "speech"))

    @property
    def recent(self) -> Sequence[RequestRecord]:
        return self.records

    async def models(self, *, described: bool = False) -> list[ApiModel]:
        return [ApiModel(id="tiny", name="Tiny", context_length=1024, format="gguf", loaded=True,
                         created=1_700_000_000)]

    def answer(self, ask: ApiAsk) -> AsyncIterator[Started | Delta | Done]:
        return self._answer(ask)

    async def _answer(self, ask: ApiAsk) -> AsyncIterator[Started | Delta | Done]:
        self.asks.append(ask)
        try:
            if self.refuse is not None:
                raise self.refuse
            self.started += 1
            yield Started(model="tiny", context_length=1024)
            for piece in self.thinking:
                yield Delta(0, piece, thinking=True)
            for piece in self.pieces:
                yield Delta(0, "", tool_call=piece) if isinstance(piece, ToolCall) else Delta(0, piece)
                await asyncio.sleep(0)
            if self.fail_midway is not None:
                raise self.fail_midway
            if self.hold:
                await asyncio.Event().wait()
            yield Done(0, AnswerStats(prompt_tokens=7, tokens=len(self.pieces), tokens_per_s=50.0,
                                      finish_reason=self.finish), stop_sequence=self.stop_sequence)
        finally:
            self.closed += 1

    async def embed(self, ask: EmbeddingAsk) -> Embeddings:
        if self.embeddings is None:
            raise no_embedding_model()
        return await self.embeddings.embed(ask)

    def log(self, record: RequestRecord) -> None:
        self.records.append(record)


async def until(check: Callable[[], Any], what: str, timeout: float = 20) -> None:
    """Wait (bounded) on the loop until check() holds."""
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)
    assert check(), what


@contextmanager
def real_service(thread: LoopThread, model: Path, engine: EngineHandle | None = None,
                 server: ServerSettings | None = None) -> Iterator[Service]:
    """The real service (the composition root) over this test's home, on thread's loop, with
    model installed as the default and loaded: on a ScriptedEngine unless engine is given."""
    install(model, SMALL)
    service = thread.call(_started(engine or ScriptedEngine(), server or ServerSettings(key=KEY)))
    try:
        yield service
    finally:
        thread.call(service.shutdown())


async def _started(engine: EngineHandle, server: ServerSettings) -> Service:
    service = make_service(engine)
    try:
        await service.start_up()
        assert service.session.state == ModelState.READY, service.session.detail
        await service.update_settings(dataclasses.replace(service.keeper.settings, server=server))
    except BaseException:
        await service.shutdown()
        raise
    return service


@contextmanager
def api_over(thread: LoopThread, service: Service) -> Iterator[ApiServer]:
    """An ApiServer over the service's ApiAnswers, reading its server settings (on a free port)."""
    server = thread.call(_over(service))
    assert thread.call(server.start()), server.error
    try:
        yield server
    finally:
        thread.call(server.stop())


async def _over(service: Service) -> ApiServer:
    return ApiServer(service.api, lambda: dataclasses.replace(service.keeper.settings.server, port=0))


# The official clients keep their connections open until closed; tests/server/conftest.py
# closes every client these made at the end of each test.
OPEN_CLIENTS: list[openai.OpenAI | anthropic.Anthropic] = []


def openai_client(address: str, key: str = KEY) -> openai.OpenAI:
    client = openai.OpenAI(base_url=f"{address}/v1", api_key=key, max_retries=0, timeout=60)
    OPEN_CLIENTS.append(client)
    return client


def anthropic_client(address: str, key: str = KEY) -> anthropic.Anthropic:
    client = anthropic.Anthropic(base_url=address, api_key=key, max_retries=0, timeout=60)
    OPEN_CLIENTS.append(client)
    return client


def words(error: openai.APIStatusError | anthropic.APIStatusError) -> str:
    """The error's message as the server wrote it (OpenAI's client keeps the body's "error", Anthropic's all of it)."""
    body = error.body
    assert isinstance(body, dict), body
    inner = body.get("error", body)
    return str(inner["message"])


def chat_entries(models: list) -> list:
    """The chat models of a /v1/models list (the official client's objects or plain dicts): the speech models and
    voices Kestrel lists after them (app/server/speech_listing.py) left out."""
    def kind(model: object) -> object:
        return model.get("type") if isinstance(model, dict) else getattr(model, "type", None)
    return [model for model in models if kind(model) not in ("speech-to-text", "text-to-speech")]
