"""One engine shared by every front end: requests take turns in the order they came.

A request of Kestrel's own (the speed calibration, app/service/models/calibration.py) joins
the line as one that gives way: any other request or hold that joins after it cancels it
at once (between two tokens, or out of the line if it waits), so that a person's request
never waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from app.core.generation import GenerationSettings
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done
from app.service.models.engine_handle import EngineHandle
from app.service.events import Queued


@dataclass(frozen=True)
class Withdrawn:
    """The request was cancelled while it waited; the engine never saw it."""


class _Turn:
    """One place in the line; `moved` is set whenever the line moves or it is cancelled.
    give_way: how a turn that yields to every newcomer steps aside (None: it holds its place)."""

    def __init__(self, give_way: Callable[[], None] | None = None) -> None:
        self._moved = asyncio.Event()
        self.give_way = give_way

    def nudge(self) -> None:
        self._moved.set()

    async def moved(self) -> None:
        await self._moved.wait()
        self._moved.clear()


class EngineQueue:
    """The engine behind a line: one request at a time, first come first served."""

    def __init__(self, client: EngineHandle) -> None:
        self.client = client
        self._line: list[_Turn] = []

    @property
    def busy(self) -> bool:
        """True while any front end's request holds or waits for the engine (one that gives way
        to every newcomer does not count: it keeps nobody waiting)."""
        return any(turn.give_way is None for turn in self._line)

    def request(self, messages: Sequence[ChatMessage], settings: GenerationSettings, *,
                stop: Sequence[str] = (), trim_history: bool = False, threads: int | None = None,
                shape: AnswerShape | None = None, gives_way: bool = False, keep_state: bool = True) -> EngineRequest:
        """An answer that joins the line once its events() are read; threads: for this
        answer (None: as loaded); shape: its raw prompt, grammar or tools (None: a chat's);
        gives_way: cancelled as soon as any other request or hold joins the line; keep_state
        False: the engine saves no state of it (a temporary chat)."""
        return EngineRequest(self, messages, settings, stop, trim_history, threads, shape, gives_way, keep_state)

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """Hold the engine for a load, reset or unload, after the requests before it."""
        turn = self._join()
        try:
            while self._ahead(turn):
                await turn.moved()
            yield
        finally:
            self._leave(turn)

    def _join(self, give_way: Callable[[], None] | None = None) -> _Turn:
        if give_way is None:
            for other in self._line:
                if other.give_way is not None:
                    other.give_way()
        turn = _Turn(give_way)
        self._line.append(turn)
        return turn

    def _ahead(self, turn: _Turn) -> int:
        return self._line.index(turn)

    def _leave(self, turn: _Turn) -> None:
        if turn in self._line:
            self._line.remove(turn)
            for other in self._line:
                other.nudge()


class EngineRequest:
    """One answer asked of the shared engine.

    `async for event in request.events()` yields Queued (with how many go first) while
    it waits, then the engine's Delta events and one Done; or Withdrawn if it was
    cancelled before its turn. cancel() works in both phases: waiting, it leaves the
    line; running, the engine stops between two tokens (Done, finish_reason
    "cancelled").
    """

    def __init__(self, queue: EngineQueue, messages: Sequence[ChatMessage], settings: GenerationSettings,
                 stop: Sequence[str], trim_history: bool, threads: int | None = None,
                 shape: AnswerShape | None = None, gives_way: bool = False, keep_state: bool = True) -> None:
        self._queue = queue
        self._keep_state = keep_state
        self._gives_way = gives_way
        self._shape = shape
        self._messages = tuple(messages)
        self._settings = settings
        self._stop = tuple(stop)
        self._trim_history = trim_history
        self._threads = threads
        self._turn: _Turn | None = None
        self.running = False
        self.cancelled = False

    async def events(self) -> AsyncGenerator[Queued | Delta | Done | Withdrawn, None]:
        queue = self._queue
        turn = self._turn = queue._join(self.cancel if self._gives_way else None)
        told = 0
        try:
            while (ahead := queue._ahead(turn)) and not self.cancelled:
                if ahead != told:
                    told = ahead
                    yield Queued(ahead)
                await turn.moved()
            if self.cancelled:
                yield Withdrawn()
                return
            self.running = True
            async for event in queue.client.generate(self._messages, self._settings, stop=self._stop,
                                                     trim_history=self._trim_history, threads=self._threads,
                                                     shape=self._shape, keep_state=self._keep_state):
                if isinstance(event, Done):
                    # The next request may start at once, even if this caller is slow
                    # to ask for what follows Done.
                    self.running = False
                    queue._leave(turn)
                yield event
        finally:
            self.running = False
            queue._leave(turn)

    def cancel(self) -> None:
        """Leave the line, or stop the answer between two tokens."""
        self.cancelled = True
        if self.running:
            self._queue.client.cancel()
        elif self._turn is not None:
            self._turn.nudge()
