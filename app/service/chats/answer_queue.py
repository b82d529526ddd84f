"""The chats waiting for an answer: one is answered at a time, the others wait in the order sent."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from app.service.chats.answer_run import AnswerRun


class Turn:
    """One chat's answer in the line.

    conversation_id is None until the new chat it belongs to is saved. The turn is
    `ready` once the user's message is saved (only then may its answer start); `run` is
    its answer once the engine was asked for it. `model_id` is the chat's own model
    (None: the app's), as it was when the message was sent. `asker` tells apart two new
    chats being saved at once (None: the window's open chat; quick ask's exchange is another).
    """

    def __init__(self, conversation_id: int | None, model_id: str | None, asker: object = None) -> None:
        self.conversation_id = conversation_id
        self.model_id = model_id
        self.asker = asker
        self.ready = False
        self.run: AnswerRun | None = None
        self.task: asyncio.Task | None = None
        self.ended = asyncio.Event()


class AnswerQueue:
    """The line of chats waiting for an answer; the first is the one being answered.

    `serve(turn)` (Answering's) readies the model and writes the answer; the
    queue calls it for each ready turn in order and calls `changed()` whenever who is
    answered or who waits changes.
    """

    def __init__(self, serve: Callable[[Turn], Awaitable[None]],
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task], changed: Callable[[], None]) -> None:
        self._serve = serve
        self._spawn = spawn
        self._changed = changed
        self.turns: list[Turn] = []
        self._serving: asyncio.Task | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def answering_id(self) -> int | None:
        """The chat first in line: its answer is being written (or its model loads)."""
        return self.turns[0].conversation_id if self.turns else None

    @property
    def waiting_ids(self) -> tuple[int, ...]:
        """The chats after it, in the order they will be answered."""
        return tuple(t.conversation_id for t in self.turns[1:] if t.conversation_id is not None)

    @property
    def idle(self) -> bool:
        """True when no chat is being answered and none waits."""
        return not self.turns

    @property
    def run(self) -> AnswerRun | None:
        """The answer the engine is asked for now, if any."""
        return self.turns[0].run if self.turns else None

    def turn_of(self, conversation_id: int | None, asker: object = None) -> Turn | None:
        """The turn of this chat (None: of the new chat `asker` is saving), if it has one."""
        return next((t for t in self.turns if t.conversation_id == conversation_id
                     and (conversation_id is not None or t.asker is asker)), None)

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def join(self, conversation_id: int | None, model_id: str | None, asker: object = None) -> Turn:
        """A chat's answer takes the last place; it starts once `ready()` says so."""
        turn = Turn(conversation_id, model_id, asker)
        self.turns.append(turn)
        self._idle.clear()
        self._changed()
        return turn

    def name(self, turn: Turn, conversation_id: int) -> None:
        """The new chat of this turn was saved under this id."""
        turn.conversation_id = conversation_id
        self._changed()

    def ready(self, turn: Turn) -> None:
        """The turn's message is saved: its answer may start when its turn comes."""
        if turn in self.turns:
            turn.ready = True
            self._serve_next()

    def drop(self, turn: Turn) -> None:
        """Stop this chat's answer (what was written stays), or take it out of the line."""
        if turn not in self.turns:
            return
        if turn.run is not None:
            turn.run.cancel()  # it leaves the line when its answer has ended
            return
        if turn.task is not None:
            turn.task.cancel()  # it was waiting for its model; the load itself goes on
            return
        self._leave(turn)
        self._serve_next()

    def close(self) -> asyncio.Task | None:
        """Kestrel is closing: the waiting leave the line, the answer is stopped; returns
        what to wait for until it is saved."""
        for turn in self.turns[1:]:
            self.drop(turn)
        if self.turns:
            self.drop(self.turns[0])
        return self._serving

    def _leave(self, turn: Turn) -> None:
        if turn in self.turns:
            self.turns.remove(turn)
            turn.ended.set()
            if not self.turns:
                self._idle.set()
            self._changed()

    def _serve_next(self) -> None:
        if self._serving is None or self._serving.done():
            self._serving = self._spawn(self._serve_all())

    async def _serve_all(self) -> None:
        # The first in line goes first even if a later one is ready sooner: its message
        # was sent first. It is saved in milliseconds; its ready() serves again.
        while self.turns and self.turns[0].ready:
            head = self.turns[0]
            head.task = asyncio.ensure_future(self._serve(head))
            try:
                # wait(), not await: the head being dropped cancels its task, not this loop.
                await asyncio.wait({head.task})
            finally:
                self._leave(head)
            if not head.task.cancelled():
                head.task.exception()  # serve() reports its own failures; this marks it seen
