"""An answer saved to the history as it grows, on the writer thread, so a crash loses little."""

from __future__ import annotations

import time
from collections.abc import Callable

from app.core.answer_stats import AnswerStats
from app.core.conversation import (Message, MessageState, Part, Role, TextPart, ToolCallPart, ToolResultPart,
                                   joined_text)
from app.core.store.history import HistoryStore
from app.service.storage import Storage


class StreamingAnswer:
    """The answer being written into one conversation.

    Text arrives in small deltas; the whole text so far is written to the history at
    most once per `flush_interval` seconds (on the writer thread), so a crash loses at
    most about that much. After a crash the message is left STREAMING;
    `HistoryStore.recover_interrupted` turns it INTERRUPTED on the next start.
    A reasoning model's thinking arrives the same way (append(..., thinking=True)) and
    is saved with it, in its own field.
    """

    def __init__(self, storage: Storage, message: Message, *, clock: Callable[[], float],
                 flush_interval: float) -> None:
        """Wrap an already stored STREAMING message; use `start()` to make one."""
        self._storage = storage
        self.message = message
        self._parts: list[str] = [message.text]
        self._thinking: list[str] = [message.thinking]
        self._clock = clock
        self._flush_interval = flush_interval
        self._last_flush = clock()
        self._flushed_length = len(message.text)
        self._length = len(message.text)
        self._done = False
        # A turn that uses tools: its parts so far, and where the running round's text
        # begins in `text` (None once a call closed that round's text into a TextPart).
        self._turn: list[Part] = list(message.parts)
        self._round_from: int | None = len(message.text)
        self._separate = False

    @classmethod
    async def start(cls, storage: Storage, conversation_id: int, *,
                    clock: Callable[[], float] = time.monotonic,
                    flush_interval: float = 1.0) -> StreamingAnswer:
        """Store an empty STREAMING assistant message and return its writer."""
        message = await storage.history(HistoryStore.add_message, conversation_id, Role.ASSISTANT, "",
                                        state=MessageState.STREAMING)
        return cls(storage, message, clock=clock, flush_interval=flush_interval)

    @property
    def message_id(self) -> int:
        return self.message.id

    @property
    def done(self) -> bool:
        """True once finish() or interrupt() has saved the final text."""
        return self._done

    @property
    def text(self) -> str:
        """All the text received so far, saved or not."""
        # Joined lazily: appending to a list stays cheap however long the answer grows.
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0]

    @property
    def thinking(self) -> str:
        """All the thinking received so far, saved or not."""
        if len(self._thinking) > 1:
            self._thinking = ["".join(self._thinking)]
        return self._thinking[0]

    async def append(self, delta: str, *, thinking: bool = False) -> bool:
        """Add a piece of the answer (or of the thinking before it); return True if this
        call wrote it to the history."""
        self._check_open()
        (self._thinking if thinking else self._parts).append(delta)
        self._length += len(delta)
        now = self._clock()
        if now - self._last_flush < self._flush_interval:
            return False
        return await self._write(now)

    @property
    def parts(self) -> tuple[Part, ...]:
        return tuple(self._turn)

    @property
    def round_start(self) -> int | None:
        """Where the running round's text begins in `text` (None: a call closed it already)."""
        return self._round_from

    async def add_part(self, part: ToolCallPart | ToolResultPart) -> tuple[Part, ...]:
        """A call the model made, or a call's result, joins the turn after the text written
        so far; saved at once (a crash keeps it). The turn's parts so far."""
        self._check_open()
        if self._round_from is not None:
            said = self.text[self._round_from:].strip()
            if said:
                self._turn.append(TextPart(said))
            self._round_from = None
        self._turn.append(part)
        await self._storage.history(HistoryStore.update_message, self.message.id, text=self.text,
                                    thinking=self.thinking, parts=tuple(self._turn))
        self._flushed_length = self._length
        return tuple(self._turn)

    def next_round(self) -> None:
        """The model writes again after its calls' results: its text is a new TextPart, set
        apart from what it said before by a blank line (see `separated`)."""
        self._round_from = len(self.text)
        self._separate = bool(self.text.strip())

    def separated(self, delta: str) -> str:
        """The delta as it joins the text: a new round's first words after a blank line."""
        if self._separate and delta.strip():
            self._separate = False
            return "\n\n" + delta.lstrip()
        return delta

    async def flush(self) -> bool:
        """Write the text now if some is unsaved; return True if it wrote."""
        self._check_open()
        return await self._write(self._clock())

    async def finish(self, stats: AnswerStats | None = None) -> Message:
        """Save the whole answer as COMPLETE, with what the engine reported about it."""
        return await self._close(MessageState.COMPLETE, stats)

    async def interrupt(self, stats: AnswerStats | None = None) -> Message:
        """Save the text so far as INTERRUPTED (stopped, or the engine failed)."""
        return await self._close(MessageState.INTERRUPTED, stats)

    def unsaved(self) -> Message:
        """The answer as shown, marked INTERRUPTED, when the history could not take it."""
        self._done = True
        parts = self._closed_parts()
        return Message(self.message.id, self.message.conversation_id, Role.ASSISTANT,
                       joined_text(parts) if parts else self.text, self.message.created, MessageState.INTERRUPTED,
                       None, self.thinking, parts)

    async def _write(self, now: float) -> bool:
        if self._length == self._flushed_length:
            return False
        length = self._length
        await self._storage.history(HistoryStore.update_message, self.message.id, text=self.text,
                                    thinking=self.thinking)
        # Set only after a successful write, so a failed one is retried next time.
        self._last_flush = now
        self._flushed_length = length
        return True

    def _closed_parts(self) -> tuple[Part, ...]:
        """The turn's parts with the last round's text (none for a turn without tools)."""
        if not self._turn:
            return ()
        last = self.text[self._round_from:].strip() if self._round_from is not None else ""
        return (*self._turn, TextPart(last)) if last else tuple(self._turn)

    async def _close(self, state: MessageState, stats: AnswerStats | None) -> Message:
        self._check_open()
        parts, thinking = self._closed_parts(), self.thinking
        text = joined_text(parts) if parts else self.text
        await self._storage.history(HistoryStore.update_message, self.message.id, text=text,
                                    state=state, stats=stats, thinking=thinking, parts=parts if parts else None)
        self._done = True
        return Message(self.message.id, self.message.conversation_id, Role.ASSISTANT, text,
                       self.message.created, state, stats, thinking, parts)

    def _check_open(self) -> None:
        if self._done:
            raise RuntimeError(f"message {self.message.id} is already finished")
