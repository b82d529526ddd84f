"""The controller's calls for files and collections in a chat, in the one place the window makes them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.core.attachments import AttachedFile, AttachedImage
from app.service.documents.document_context import AttachmentsUnreadable

if TYPE_CHECKING:
    from app.service.controller import ChatController


class ChatDocumentsCalls:
    """What the window asks the controller about documents: `read_attachments(paths)`,
    `send(text, attachments, images)`, `chat_collections()`, `set_chat_collections(names)` and
    `controller.collections` (the DocumentsService, its `collections()`), in one place, with
    the answers in the window's terms (a chip's reason, names); tests give a small fake
    controller with that API (tests/ui/test_attachments.py)."""

    def __init__(self, controller: ChatController) -> None:
        self._controller = controller

    async def read(self, path: Path) -> AttachedFile | str:
        """The file read (by the controller's reader worker, off the UI thread), or why it cannot be.

        One file a call, so that each chip says its own file's reason.
        """
        try:
            read = await self._controller.read_attachments([path])
        except AttachmentsUnreadable as unreadable:
            reasons = [item.reason for item in unreadable.unreadable]
            reason = reasons[0] if len(reasons) == 1 else str(unreadable)
            return reason[:1].upper() + reason[1:]
        if len(read) != 1:
            raise AssertionError(f"read_attachments gave {len(read)} files for one path")
        return read[0]

    def send(self, text: str, attachments: Sequence[AttachedFile], images: Sequence[AttachedImage] = ()) -> bool:
        """Send the open chat's message with these files and images (none: the text alone)."""
        return self._controller.send(text, tuple(attachments), tuple(images))

    def collections(self) -> tuple[str, ...]:
        """The names of every collection (last known: no I/O)."""
        return tuple(info.name for info in self._controller.collections.collections())

    def chosen(self) -> tuple[str, ...]:
        """The collections the open chat answers from."""
        return tuple(self._controller.chat_collections())

    async def choose(self, names: Sequence[str]) -> None:
        """The open chat answers from these collections from its next question on."""
        await self._controller.set_chat_collections(tuple(names))
