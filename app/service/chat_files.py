"""Export a chat to a Markdown or JSON file, and import a JSON export back as a new chat."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from app.core.chat_export import ChatFileError, ImportedChat, read_chat, to_json, to_markdown
from app.core.conversation import Conversation, Message
from app.core.files import write_atomically
from app.core.history import HistoryError, HistoryStore
from app.service.events import ConversationChanged, Event, Problem
from app.service.storage import Storage

FORMATS = ("markdown", "json")


class ChatFiles:
    """Chats to and from files, the disk work on worker threads; failures are Problems
    that name the file and say what is wrong."""

    def __init__(self, storage: Callable[[], Storage], emit: Callable[[Event], None]) -> None:
        self._storage = storage
        self._emit = emit

    async def export(self, conversation_id: int, path: Path, fmt: str) -> bool:
        """Write the chat to path as "markdown" or "json"; True once it is on disk."""
        if fmt not in FORMATS:
            raise ValueError(f"unknown export format {fmt!r}")  # a bug: the caller offers only FORMATS
        try:
            conversation, messages = await self._storage().history(_read_chat, conversation_id)
        except (HistoryError, KeyError) as exc:
            self._emit(Problem(f"The chat could not be exported to {path}: "
                               + (str(exc) if isinstance(exc, HistoryError) else "it is gone."), "history"))
            return False
        # Off the loop: a chat of thousands of messages takes a while to write out.
        text = await asyncio.to_thread(to_json if fmt == "json" else to_markdown, conversation, messages)
        try:
            await asyncio.to_thread(write_atomically, path, text.encode("utf-8"))
        except OSError as exc:
            self._emit(Problem(f"The chat could not be saved as {path} ({exc.strerror or exc}). Choose another "
                               "folder, or free some space, then try again.", "disk"))
            return False
        return True

    async def import_(self, path: Path) -> int | None:
        """Add the chat exported to path as a new chat; its id, or None (a Problem says why)."""
        try:
            chat = await asyncio.to_thread(read_chat, path)
        except ChatFileError as exc:
            self._emit(Problem(str(exc)))
            return None
        try:
            conversation = await self._storage().history(_store_chat, chat)
        except HistoryError as exc:
            self._emit(Problem(f"The chat in {path} could not be imported: {exc}", "history"))
            return None
        self._emit(ConversationChanged(conversation))
        return conversation.id


def _read_chat(store: HistoryStore, conversation_id: int) -> tuple[Conversation, list[Message]]:
    return store.get_conversation(conversation_id), store.messages(conversation_id)


def _store_chat(store: HistoryStore, chat: ImportedChat) -> Conversation:
    """The imported chat in one transaction: all of it, or nothing if the disk refuses."""
    with store.transaction():
        conversation_id = store.insert_conversation(chat.conversation)
        for message in chat.messages:
            store.insert_message(message, conversation_id)
    return store.get_conversation(conversation_id)
