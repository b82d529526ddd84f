"""The collections the open chat answers from: saved on the chat, or kept for a new one until its first message."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from app.core.store.history import HistoryError, HistoryStore
from app.documents.collections import DocumentsError, Hit
from app.service.chats.conversations import Conversations
from app.service.event_bus import EventBus
from app.service.events import ConversationOpened, Event, Problem
from app.service.chats.open_chat import OpenChat
from app.service.storage import Storage

if TYPE_CHECKING:
    from app.service.documents.document_context import SearchCollections
    from app.service.documents.documents_service import DocumentsService


class ChatCollections:
    """Which collections the open chat searches for each question (Conversation.collections).

    A new chat is not saved for a choice of collections (no empty chats in the list): the
    choice is kept here until its first message saves it (`take_pending`, with that message);
    opening another chat, or a new one, forgets it.
    """

    def __init__(self, storage: Callable[[], Storage], chat: OpenChat, conversations: Conversations,
                 bus: EventBus) -> None:
        self._storage = storage
        self._chat = chat
        self._conversations = conversations
        self._emit = bus.emit
        self._pending: tuple[str, ...] | None = None
        bus.subscribe(self._heard)

    def _heard(self, event: Event) -> None:
        if isinstance(event, ConversationOpened):
            self._pending = None

    def names(self) -> tuple[str, ...]:
        if self._pending is not None:
            return self._pending
        conversation = self._chat.conversation
        return conversation.collections if conversation is not None else ()

    def take_pending(self) -> tuple[str, ...] | None:
        """The choice made before the chat's first message (None: none), now going with it."""
        pending, self._pending = self._pending, None
        return pending

    async def choose(self, names: Sequence[str]) -> None:
        """Saved on the open chat at once (a Problem if the disk refuses), or kept for a new one."""
        chosen = tuple(dict.fromkeys(name for name in names if name))
        conversation = self._chat.conversation
        if conversation is None or self._chat.untitled(conversation.id):
            self._pending = chosen  # saved with its first message
            return
        try:
            await self._storage().history(HistoryStore.set_collections, conversation.id, chosen)
            await self._conversations.refresh(conversation.id, to_top=False)
        except (HistoryError, KeyError) as exc:
            self._emit(Problem(str(exc) if isinstance(exc, HistoryError) else "That chat is gone.", "history"))


def collection_search(service: DocumentsService) -> SearchCollections:
    """ChatDocuments' search over the window's collections. DocumentsService.search leaves out a
    name that is no longer a collection; here it is refused (DocumentsError), so the answer says
    which one it went on without."""
    async def search(question: str, names: Sequence[str], limit: int) -> list[Hit]:
        known = {info.name for info in service.collections()}
        gone = [name for name in names if name not in known]
        if gone:
            raise DocumentsError(f"There is no collection named {gone[0]!r} any more. Take it off this chat, or "
                                 "add its folder again (View → Documents).")
        return await service.search(question, names, limit)

    return search
