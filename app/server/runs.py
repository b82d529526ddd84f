"""Running one answer for a request: its first event, all of it, and what the request log records.

A request's answer is the service's async generator. Closing it (or cancelling the task that
reads it) cancels the engine's answer, so everything here ends it the moment the client is
gone: while it waits in the queue, while a whole answer is collected, and mid-stream (there
Starlette's StreamingResponse cancels the body when the client disconnects).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from starlette.requests import Request

from app.core.answer_stats import AnswerStats, FinishReason
from app.engine.protocol import Delta, Done, ToolCall
from app.service.api.api_answers import ApiAnswers, ApiAsk, Started

Event = Started | Delta | Done
T = TypeVar("T")
# nginx's word for it: the client closed the connection before the answer was sent.
CLIENT_GONE = 499


class ClientGone(Exception):
    """The client disconnected before its answer was ready; nothing is left to send."""


@dataclass
class Outcome:
    """What the request log says of one request, filled in as the answer runs."""

    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_per_s: float = 0.0
    status: int | None = None  # set where it differs from the HTTP status sent (a stream that failed)

    def started(self, started: Started) -> None:
        self.model = started.model

    def done(self, stats: AnswerStats) -> None:
        self.prompt_tokens = stats.prompt_tokens
        self.completion_tokens = stats.tokens
        self.tokens_per_s = stats.tokens_per_s


OUTCOME_KEY = "kestrel.outcome"


def outcome_of(request: Request) -> Outcome:
    """The request's record, made by the server's middleware (a fresh one in unit tests)."""
    found = request.scope.get(OUTCOME_KEY)
    if not isinstance(found, Outcome):
        found = request.scope[OUTCOME_KEY] = Outcome()
    return found


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def until_gone(request: Request, work: Awaitable[T]) -> T:
    """work's result, or ClientGone (work cancelled) if the client disconnects first.

    Once the client is seen gone, the request is gone, however work then ends: an answer told to
    stop may still end with its Done, and sending it would go nowhere (the log says 499)."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, watch):
            if not pending.done():
                pending.cancel()
        await asyncio.gather(task, watch, return_exceptions=True)
    if task.cancelled() or (watch.done() and not watch.cancelled() and watch.exception() is None):
        outcome_of(request).status = CLIENT_GONE
        raise ClientGone()
    if task.exception() is None:
        return task.result()
    raise task.exception()  # type: ignore[misc]


async def close(stream: AsyncIterator[Event]) -> None:
    """End an answer's generator, which cancels its engine answer if it still runs."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


async def opened(request: Request, answers: ApiAnswers, ask: ApiAsk) -> tuple[Started, AsyncIterator[Event]]:
    """The answer's stream once it has started: ApiRefused (before anything is sent) or ClientGone."""
    stream = answers.answer(ask)
    try:
        first = await until_gone(request, anext(stream))
    except BaseException:
        await close(stream)
        raise
    if not isinstance(first, Started):
        await close(stream)
        raise AssertionError(f"an API answer began with {first!r}, not Started")
    outcome_of(request).started(first)
    return first, stream


@dataclass
class Collected:
    """A whole answer, for a request that did not ask to stream."""

    started: Started
    text: str = ""
    thinking: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    stats: AnswerStats = field(default_factory=AnswerStats)
    stop_sequence: str | None = None  # the request's stop string that ended it


async def collect(request: Request, answers: ApiAnswers, ask: ApiAsk) -> Collected:
    """The whole answer: ApiRefused, or ClientGone if the client leaves first (its answer cancelled)."""
    started, stream = await opened(request, answers, ask)

    async def read() -> Collected:
        found = Collected(started)
        text: list[str] = []
        thinking: list[str] = []
        try:
            async for event in stream:
                if isinstance(event, Delta) and event.tool_call is not None:
                    found.calls.append(event.tool_call)
                elif isinstance(event, Delta):
                    (thinking if event.thinking else text).append(event.text)
                elif isinstance(event, Done):
                    found.stats, found.stop_sequence = event.stats, event.stop_sequence
        finally:
            await close(stream)
        found.text, found.thinking = "".join(text), "".join(thinking)
        return found

    collected = await until_gone(request, read())
    outcome_of(request).done(collected.stats)
    return collected


def cut_short(stats: AnswerStats) -> bool:
    """The answer ended at its token limit or the context's end, not where the model chose."""
    return stats.finish_reason in (FinishReason.LENGTH, FinishReason.CONTEXT)
