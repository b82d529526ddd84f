"""Temporary chats: kept in memory only, never in the history file, given no memory, gone once left."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

from app.core.conversation import Conversation
from app.core.generation import GenerationSettings
from app.core.settings import Settings
from app.core.store.history import HistoryStore
from app.core.store.memories import set_chat_memory
from app.service.event_bus import EventBus
from app.service.events import ConversationOpened, Event
from app.service.storage import IN_MEMORY, Storage

P = ParamSpec("P")
T = TypeVar("T")

# A temporary chat's id and its messages' ids are above this; a saved chat's never reach it (a
# history would need a billion messages), so an id alone says which store holds it. Below 2**31:
# ids cross Qt signals typed int.
TEMPORARY_IDS = 1_000_000_000
TEMPORARY_TITLE = "Temporary chat"


def is_temporary(record_id: int | None) -> bool:
    """Whether a chat's or a message's id is a temporary chat's (kept in memory only)."""
    return record_id is not None and record_id > TEMPORARY_IDS


class TemporaryChats:
    """The chats kept in memory only: a HistoryStore of their own in SQLite's memory, on a thread of
    their own, numbered above TEMPORARY_IDS; nothing of them reaches the history file.

    `start()` makes one (its memory switch off, so no memory is given or offered to remember) and
    shows it; once another chat is shown (ConversationOpened for any other), it is discarded: its
    answer stopped and the chat deleted from memory (`discard`, Answering.delete). `storage` is the
    history as the chat owners see it (`routed`): calls about a temporary chat go to memory.
    """

    def __init__(self, saved: Callable[[], Storage], bus: EventBus,
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]], *,
                 show: Callable[[int], Awaitable[None]],
                 discard: Callable[[int], Coroutine[Any, Any, bool]]) -> None:
        self._memory: Storage | None = None
        self._spawn = spawn
        self._show = show
        self._discard = discard
        self._kept: set[int] = set()  # the temporary chats not yet discarded (the open one, at most, once settled)
        self._routed = RoutedStorage(saved, self._in_memory)
        bus.subscribe(self._heard)

    def routed(self) -> Storage:
        """The history as the chat owners see it: a temporary chat's calls go to memory."""
        return self._routed

    def _in_memory(self) -> Storage:
        if self._memory is None:
            raise RuntimeError("no temporary chat was started")
        return self._memory

    async def start(self, system_prompt: str, settings: GenerationSettings, model_id: str | None) -> Conversation:
        """A new temporary chat with a new chat's defaults, shown at once (the chat shown before it is
        left: a temporary one is discarded)."""
        memory = await self._open()
        conversation = await memory.history(HistoryStore.create_conversation, title=TEMPORARY_TITLE,
                                            system_prompt=system_prompt, settings=settings, model=model_id)
        await memory.history(set_chat_memory, conversation.id, False)
        self._kept.add(conversation.id)
        await self._show(conversation.id)
        return await memory.history(HistoryStore.get_conversation, conversation.id)

    async def _open(self) -> Storage:
        """The store in memory, made with the first temporary chat (most runs never need it)."""
        if self._memory is None:
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kestrel-temporary")
            store = await asyncio.get_running_loop().run_in_executor(executor, _numbered_store)
            self._memory = Storage(executor, store, None, Settings())
        return self._memory

    def _heard(self, event: Event) -> None:
        if isinstance(event, ConversationOpened):
            shown = event.conversation.id if event.conversation is not None else None
            for conversation_id in sorted(c for c in self._kept if c != shown):
                self._kept.discard(conversation_id)
                self._spawn(self._discard(conversation_id))

    async def close(self) -> None:
        """Kestrel is closing: whatever is in memory goes with it."""
        if self._memory is not None:
            await self._memory.close()


def _numbered_store() -> HistoryStore:
    """A history in memory whose chats and messages are numbered from TEMPORARY_IDS (on its own thread:
    SQLite's connection stays on the thread that made it)."""
    store = HistoryStore(IN_MEMORY)
    with store.transaction() as conn:
        conn.executemany("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)",
                         [("conversations", TEMPORARY_IDS), ("messages", TEMPORARY_IDS)])
    return store


class RoutedStorage(Storage):
    """The history as the chat owners (Conversations, Answering) see it: a call whose first argument is a
    temporary chat's or message's id (is_temporary) runs on the store in memory, every other on the
    history file's. Only `history()` is theirs: Storage's other calls (settings, watching, closing)
    belong to the history's own Storage, which the rest of the service holds."""

    def __init__(self, saved: Callable[[], Storage], in_memory: Callable[[], Storage]) -> None:
        # Storage.__init__ is not run: this holds no store of its own, it chooses one per call.
        self._saved, self._temporary = saved, in_memory

    async def history(self, method: Callable[Concatenate[HistoryStore, P], T],
                      *args: P.args, **kwargs: P.kwargs) -> T:  # Override Storage.history: routed by id.
        first = args[0] if args else None
        storage = self._temporary() if isinstance(first, int) and is_temporary(first) else self._saved()
        return await storage.history(method, *args, **kwargs)

    @property
    def in_memory(self) -> bool:
        return self._saved().in_memory
