"""Export a chat to a Markdown or JSON file, and import a JSON export back as a new chat."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from app.core.chat_export import ChatFileError, ImportedChat, read_chat, to_json, to_markdown
from app.core.conversation import Conversation, Message
from app.core.files import Refusal, TargetRefused, write_user_file
from app.core.store.history import HistoryError, HistoryStore
from app.service.documents.attached_images import CheckImages, in_worker, not_started
from app.service.events import ConversationChanged, Event, Problem
from app.service.chats.imported_images import check_imported_images
from app.service.storage import Storage

FORMATS = ("markdown", "json")


class ExportOutcome(Enum):
    """How an export ended; all but WRITTEN came with a Problem that says why."""

    WRITTEN = "written"
    NO_CHAT = "no chat"  # the chat is gone, or the history could not be read
    EXISTS = "exists"  # a file is there and replacing it was not asked for
    REFUSED = "refused"  # a link, a device, a pipe, a folder, or no such folder
    FAILED = "failed"  # the disk refused the file (full, read-only, no permission)


@dataclass(frozen=True)
class Imported:
    """How an import ended: the new chat's id, or None with a Problem that said why;
    file_refused when the file is no chat export Kestrel reads (not the history's fault)."""

    chat_id: int | None
    file_refused: bool = False
    left_out: str = ""  # the images the check refused, left out of the chat (a Problem said so too)


class ChatFiles:
    """Chats to and from files, the disk work on worker threads; failures are Problems
    that name the file and say what is wrong."""

    def __init__(self, storage: Callable[[], Storage], emit: Callable[[Event], None], *,
                 check: CheckImages = in_worker) -> None:
        self._storage = storage
        self._emit = emit
        self._check = check  # an imported chat's images: the image check's child (attached_images)

    async def export(self, conversation_id: int, path: Path, fmt: str, *, replace: bool = False) -> ExportOutcome:
        """Write the chat to path as "markdown" or "json": a new file, or with replace the
        regular file there (its mode kept). Never through a link or over a device, a pipe
        or a folder, and never into a folder that is not there."""
        text = await self.render(conversation_id, fmt, where=f"to {path}")
        if text is None:
            return ExportOutcome.NO_CHAT
        try:
            await asyncio.to_thread(write_user_file, path, text.encode("utf-8"), replace=replace)
        except TargetRefused as refused:
            self._emit(Problem(_refusal_words(refused), "disk"))
            return ExportOutcome.EXISTS if refused.refusal is Refusal.EXISTS else ExportOutcome.REFUSED
        except OSError as exc:
            self._emit(Problem(f"The chat could not be saved as {path} ({exc.strerror or exc}). Choose another "
                               "folder, or free some space, then try again.", "disk"))
            return ExportOutcome.FAILED
        return ExportOutcome.WRITTEN

    async def render(self, conversation_id: int, fmt: str, where: str = "") -> str | None:
        """The chat as the text of a "markdown" or "json" export; None (and a Problem) if
        it cannot be read. where ("to FILE") names the export in that Problem."""
        if fmt not in FORMATS:
            raise ValueError(f"unknown export format {fmt!r}")  # a bug: the caller offers only FORMATS
        try:
            conversation, messages = await self._storage().history(_read_chat, conversation_id)
        except (HistoryError, KeyError) as exc:
            self._emit(Problem(f"The chat could not be exported{f' {where}' if where else ''}: "
                               + (str(exc) if isinstance(exc, HistoryError) else "it is gone."), "history"))
            return None
        # Off the loop: a chat of thousands of messages takes a while to write out.
        return await asyncio.to_thread(to_json if fmt == "json" else to_markdown, conversation, messages)

    async def import_(self, path: Path) -> int | None:
        """Add the chat exported to path as a new chat; its id, or None (a Problem says why)."""
        return (await self.import_file(path)).chat_id

    async def import_file(self, path: Path) -> Imported:
        """As import_, saying whether the file was refused or the history failed."""
        try:
            chat = await asyncio.to_thread(read_chat, path)
        except ChatFileError as exc:
            self._emit(Problem(str(exc)))
            return Imported(None, file_refused=True)
        try:
            checked = await asyncio.to_thread(check_imported_images, chat, self._check)
        except RuntimeError as exc:
            self._emit(Problem(f"The chat in {path} was not imported: {not_started(exc)}"))
            return Imported(None)
        try:
            conversation = await self._storage().history(_store_chat, checked.chat)
        except HistoryError as exc:
            self._emit(Problem(f"The chat in {path} could not be imported: {exc}", "history"))
            return Imported(None)
        self._emit(ConversationChanged(conversation))
        if checked.left_out:
            self._emit(Problem(f"The chat in {path} was imported as \"{conversation.title}\", but {checked.left_out}"))
        return Imported(conversation.id, left_out=checked.left_out)


def _refusal_words(refused: TargetRefused) -> str:
    path = refused.path
    if refused.refusal is Refusal.EXISTS:
        return f"The chat was not exported: {path} already exists, and Kestrel replaces a file only when asked to."
    if refused.refusal is Refusal.LINK:
        return (f"The chat was not exported: {path} is a link to another file, and Kestrel does not write through "
                "links. Name the file itself, or choose a new name.")
    if refused.refusal is Refusal.NOT_A_FILE:
        return f"The chat was not exported: {path} is {refused.what}, not a file. Choose a file name."
    if refused.what:
        return f"The chat was not exported as {path}: {path.parent} is not a folder. Choose another folder."
    return (f"The chat was not exported as {path}: the folder {path.parent} does not exist. Choose another "
            "folder, or create that one first.")


def _read_chat(store: HistoryStore, conversation_id: int) -> tuple[Conversation, list[Message]]:
    return store.get_conversation(conversation_id), store.messages(conversation_id)


def _store_chat(store: HistoryStore, chat: ImportedChat) -> Conversation:
    """The imported chat in one transaction: all of it, or nothing if the disk refuses."""
    with store.transaction():
        conversation_id = store.insert_conversation(chat.conversation)
        for message in chat.messages:
            store.insert_message(message, conversation_id)
    return store.get_conversation(conversation_id)
