"""Driving a remote model through the real engine process: load it, stream an answer, and collect how it ended."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from app.core.generation import GenerationSettings
from app.core.paths import data_paths
from app.engine.failures import ServerFailed
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done
from app.library.servers.book import ServerBook
from app.library.servers.faults import ServerFacts
from app.library.servers.records import ServerKind, remote_address
from app.service.models.client import EngineClient
from app.service.models.engine_errors import EngineError

HELLO = (ChatMessage("user", "hello there"),)
LIMIT_S = 120  # a net for a test that would otherwise hang; no test waits for it


@dataclass
class Streamed:
    """One answer as the engine gave it: its deltas, then Done, or the EngineError that ended it."""

    deltas: list[Delta] = field(default_factory=list)
    done: Done | None = None
    error: EngineError | None = None

    @property
    def text(self) -> str:
        return "".join(d.text for d in self.deltas if not d.thinking and d.tool_call is None)

    @property
    def facts(self) -> ServerFacts:
        assert self.error is not None and isinstance(self.error.failure, ServerFailed), self.error
        return self.error.failure.facts


def add_server(name: str, url: str, kind: ServerKind, key: str | None = None, wait_s: float = 120.0) -> None:
    """Added as the person adds one: to this test's Kestrel home, which the engine process reads too."""
    ServerBook.at(data_paths().ensure()).add(name, url, kind, key, wait_s=wait_s)


async def stream(client: EngineClient, messages: tuple[ChatMessage, ...] = HELLO,
                 settings: GenerationSettings | None = None, shape: AnswerShape | None = None,
                 after_delta: Callable[[Delta], None] | None = None) -> Streamed:
    streamed = Streamed()
    try:
        async for event in client.generate(messages, settings or GenerationSettings(max_tokens=64), shape=shape):
            if isinstance(event, Delta):
                streamed.deltas.append(event)
                if after_delta is not None:
                    after_delta(event)
            else:
                streamed.done = event
    except EngineError as exc:
        streamed.error = exc
    return streamed


def with_engine(work: Callable[[EngineClient], Awaitable[object]]) -> object:
    """Run work with a fresh engine, shut down after, under the net."""

    async def scenario() -> object:
        client = EngineClient()
        try:
            return await work(client)
        finally:
            await client.shutdown()

    return asyncio.run(asyncio.wait_for(scenario(), timeout=LIMIT_S))


async def load(client: EngineClient, server: str, model: str, context_length: int = 4096) -> EngineError | None:
    """Load the server's model; the refusal, or None when it loaded."""
    try:
        await client.load(remote_address(server, model), context_length=context_length)
    except EngineError as exc:
        return exc
    return None
