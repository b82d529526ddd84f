"""The controller's calls for files and collections in a chat, in the one place the window makes them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.core.attachments import AttachedFile
from app.service.document_context import AttachmentsUnreadable


class ChatDocumentsCalls:
    """What the window asks the controller about documents, by the names docs2's plan gives:
    `read_attachments(paths)`, `send(text, attachments)`, `chat_collections()`,
    `set_chat_collections(names)` and `controller.collections` (the DocumentsService, its
    `collections()`).

    One seam so that tests give a fake controller with that API, and so that a controller
    without it yet (the service's side landing separately) leaves the window working as
    before: `can_attach` / `has_collections` say whether the buttons are offered.
    """

    def __init__(self, controller: object) -> None:
        self._controller = controller

    @property
    def can_attach(self) -> bool:
        return hasattr(self._controller, "read_attachments")

    @property
    def has_collections(self) -> bool:
        return hasattr(self._controller, "chat_collections") and hasattr(
            getattr(self._controller, "collections", None), "collections")

    async def read(self, path: Path) -> AttachedFile | str:
        """The file read (by the controller's reader worker, off the UI thread), or why it cannot be.

        One file a call, so that each chip says its own file's reason.
        """
        try:
            read: tuple[AttachedFile, ...] = await getattr(self._controller, "read_attachments")([path])
        except AttachmentsUnreadable as unreadable:
            reasons = [item.reason for item in unreadable.unreadable]
            reason = reasons[0] if len(reasons) == 1 else str(unreadable)
            return reason[:1].upper() + reason[1:]
        if len(read) != 1:
            raise AssertionError(f"read_attachments gave {len(read)} files for one path")
        return read[0]

    def send(self, text: str, attachments: Sequence[AttachedFile]) -> bool:
        """Send the open chat's message; without attachments, as before they existed."""
        send = getattr(self._controller, "send")
        accepted: bool = send(text, tuple(attachments)) if attachments else send(text)
        return accepted

    def collections(self) -> tuple[str, ...]:
        """The names of every collection (last known: no I/O)."""
        if not self.has_collections:
            return ()
        return tuple(info.name for info in getattr(self._controller, "collections").collections())

    def chosen(self) -> tuple[str, ...]:
        """The collections the open chat answers from."""
        return tuple(getattr(self._controller, "chat_collections")()) if self.has_collections else ()

    async def choose(self, names: Sequence[str]) -> None:
        """The open chat answers from these collections from its next question on."""
        await getattr(self._controller, "set_chat_collections")(tuple(names))
