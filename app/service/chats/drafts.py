"""Each chat's unsent draft: read at once from memory, written behind on the writer thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from app.core.store.drafts import read_drafts, write_drafts
from app.core.store.history import HistoryError
from app.service.events import DraftChanged, Event, Problem
from app.service.storage import Storage


class DraftBook:
    """The drafts of every chat (None: the new chat), kept in memory and in the history.

    `put()` returns at once; the history is written on the writer thread, one
    transaction for whatever changed meanwhile, so a burst of keystrokes costs one
    write and the latest text always wins. DraftChanged is emitted when a chat gains or
    loses its draft.
    """

    def __init__(self, storage: Callable[[], Storage | None], emit: Callable[[Event], None],
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task]) -> None:
        self._storage = storage
        self._emit = emit
        self._spawn = spawn
        self._texts: dict[int | None, str] = {}
        self._unsaved: dict[int | None, str] = {}
        self._writing: asyncio.Task | None = None
        self._told_problem = False

    async def load(self) -> None:
        """Read the drafts saved in the history (at start-up, or after it was replaced)."""
        storage = self._storage()
        if storage is None:
            return
        try:
            saved = await storage.history(read_drafts)
        except HistoryError:
            return  # the history's problem is said where it is opened; drafts start empty
        before = set(self._texts)
        self._texts = {**saved, **{chat: text for chat, text in self._unsaved.items()}}
        self._texts = {chat: text for chat, text in self._texts.items() if text}
        for chat in before ^ set(self._texts):
            self._emit(DraftChanged(chat, chat in self._texts))

    def text(self, conversation_id: int | None) -> str:
        return self._texts.get(conversation_id, "")

    @property
    def drafted_ids(self) -> frozenset[int]:
        """The saved chats that have a draft."""
        return frozenset(chat for chat in self._texts if chat is not None)

    def put(self, conversation_id: int | None, text: str) -> None:
        """Keep this chat's draft ("" forgets it); written soon, off the caller's thread."""
        if self._texts.get(conversation_id, "") == text and conversation_id not in self._unsaved:
            return  # unchanged (the window saves on every switch): nothing to write
        had = conversation_id in self._texts
        if text:
            self._texts[conversation_id] = text
        else:
            self._texts.pop(conversation_id, None)
        self._unsaved[conversation_id] = text
        if had != bool(text):
            self._emit(DraftChanged(conversation_id, bool(text)))
        if self._writing is None or self._writing.done():
            self._writing = self._spawn(self._write())

    def forget(self, conversation_id: int) -> None:
        """The chat was deleted (the history forgot its draft with it)."""
        self._unsaved.pop(conversation_id, None)
        if self._texts.pop(conversation_id, None) is not None:
            self._emit(DraftChanged(conversation_id, False))

    async def flush(self) -> None:
        """Until every draft put so far is written (before the history closes)."""
        while self._writing is not None and not self._writing.done():
            await asyncio.shield(self._writing)

    async def _write(self) -> None:
        while self._unsaved and (storage := self._storage()) is not None:
            batch, self._unsaved = self._unsaved, {}
            try:
                await storage.history(write_drafts, batch)
            except HistoryError as exc:
                # Said once, not on every keystroke; the draft stays in memory meanwhile.
                if not self._told_problem:
                    self._told_problem = True
                    self._emit(Problem(f"Your unsent text could not be saved: {exc}", "history"))
                return
            self._told_problem = False
