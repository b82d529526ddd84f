"""HistoryFollower: the history as another Kestrel process left it, read again for the window."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from app.core.store.history import HistoryError
from app.service.chats.conversations import Conversations
from app.service.event_bus import EventBus
from app.service.events import ConversationsListed, HistoryChangedElsewhere
from app.service.chats.open_chat import OpenChat
from app.service.chats.temporary import is_temporary
from app.service.storage import Storage


class HistoryFollower:
    """Starts the storage's watch (HistoryChangedElsewhere on the bus when another process
    commits) and, when a front end asks (`follow`), lists the chats again and shows the
    open chat as it is now.

    The open chat is read again only when nothing is being written in it (`busy()`), and
    shown again only when it changed; a chat deleted elsewhere gives way to a new chat.
    """

    def __init__(self, storage: Callable[[], Storage], bus: EventBus, loop: asyncio.AbstractEventLoop,
                 conversations: Conversations, chat: OpenChat, *, busy: Callable[[], bool],
                 show_new: Callable[[], None], show: Callable[[int], Awaitable[None]]) -> None:
        self._storage = storage
        self._bus = bus
        self._loop = loop
        self._conversations = conversations
        self._chat = chat
        self._busy = busy
        self._show_new = show_new
        self._show = show
        self._following = False
        self._again = False

    async def watch(self) -> None:
        """Hear of other processes' commits from now on (not for a history in memory)."""
        loop, emit = self._loop, self._bus.emit

        def changed() -> None:  # on the watch's thread
            try:
                loop.call_soon_threadsafe(emit, HistoryChangedElsewhere())
            except RuntimeError:
                pass  # the loop is closed: nobody is left to tell

        await self._storage().watch(changed)

    async def follow(self) -> None:
        """Read the history again; calls while a read runs fold into one more round after it."""
        if self._following:
            self._again = True
            return
        self._following, self._again = True, True
        try:
            while self._again:
                self._again = False
                await self._once()
        finally:
            self._following = False

    async def _once(self) -> None:
        listed = await self._conversations.listing()
        self._bus.emit(ConversationsListed(tuple(listed)))
        open_id = self._chat.id
        if open_id is None or is_temporary(open_id) or self._busy():
            return  # a temporary chat is in memory: no other process has it
        now = next((c for c in listed if c.id == open_id), None)
        if now is None:
            self._show_new()  # deleted elsewhere
            return
        try:
            messages = await self._conversations.messages(open_id)
        except (HistoryError, KeyError):
            return  # gone meanwhile, or the disk problem was shown by the listing
        if self._chat.id != open_id or self._busy():
            return  # the user moved on, or sent, while it was read
        if now != self._chat.conversation or messages != self._chat.messages:
            await self._show(open_id)
