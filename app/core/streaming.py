"""An assistant answer saved to the history as it grows, so a crash loses little."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from app.core.conversation import Message, MessageState, Role
from app.core.history import HistoryStore


class StreamingMessage:
    """The answer being written into one conversation.

    Text arrives in small deltas; the whole text so far is written to the history at
    most once per `flush_interval` seconds, so a crash loses at most about that much.
    After a crash the message is left STREAMING; `HistoryStore.recover_interrupted`
    turns it INTERRUPTED on the next start.
    """

    def __init__(
        self,
        store: HistoryStore,
        message: Message,
        *,
        clock: Callable[[], float],
        flush_interval: float,
    ) -> None:
        """Wrap an already stored STREAMING message; use `start()` to make one."""
        self._store = store
        self._message_id = message.id
        self._parts: list[str] = [message.text]
        self._clock = clock
        self._flush_interval = flush_interval
        self._last_flush = clock()
        self._flushed_length = len(message.text)
        self._length = len(message.text)
        self._done = False

    @classmethod
    def start(
        cls,
        store: HistoryStore,
        conversation_id: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        flush_interval: float = 1.0,
    ) -> StreamingMessage:
        """Store an empty STREAMING assistant message and return its writer."""
        message = store.add_message(
            conversation_id, Role.ASSISTANT, "", state=MessageState.STREAMING
        )
        return cls(store, message, clock=clock, flush_interval=flush_interval)

    @property
    def message_id(self) -> int:
        return self._message_id

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

    def append(self, delta: str) -> bool:
        """Add a piece of the answer; return True if this call wrote it to the history."""
        self._check_open()
        self._parts.append(delta)
        self._length += len(delta)
        now = self._clock()
        if now - self._last_flush < self._flush_interval:
            return False
        return self._write(now)

    def flush(self) -> bool:
        """Write the text now if some is unsaved; return True if it wrote."""
        self._check_open()
        return self._write(self._clock())

    def finish(self, stats: dict[str, Any] | None = None) -> Message:
        """Save the whole answer as COMPLETE, with what the engine reported about it."""
        return self._close(MessageState.COMPLETE, stats)

    def interrupt(self, stats: dict[str, Any] | None = None) -> Message:
        """Save the text so far as INTERRUPTED (stopped, or the engine failed)."""
        return self._close(MessageState.INTERRUPTED, stats)

    def _write(self, now: float) -> bool:
        if self._length == self._flushed_length:
            return False
        text = self.text
        self._store.update_message(self._message_id, text=text)
        # Set only after a successful write, so a failed one is retried next time.
        self._last_flush = now
        self._flushed_length = len(text)
        return True

    def _close(self, state: MessageState, stats: dict[str, Any] | None) -> Message:
        self._check_open()
        self._store.update_message(self._message_id, text=self.text, state=state, stats=stats)
        self._done = True
        return self._store.get_message(self._message_id)

    def _check_open(self) -> None:
        if self._done:
            raise RuntimeError(f"message {self._message_id} is already finished")
