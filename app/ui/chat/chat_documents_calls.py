"""A file attached in the window, read by the document reader, with a refusal in a chip's words."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.core.attachments import AttachedFile
from app.service.documents.document_context import AttachmentsUnreadable

if TYPE_CHECKING:
    from app.service.doors.attach import AttachDoor


class ChatDocumentsCalls:
    """Reads each attached file through AttachDoor's `read_attachments`, one file a call, so that
    each chip says its own file's reason; tests give a small stand-in door
    (tests/ui/test_attachments.py)."""

    def __init__(self, door: AttachDoor) -> None:
        self._door = door

    async def read(self, path: Path) -> AttachedFile | str:
        """The file read (in the reader's worker, off the UI thread), or why it cannot be."""
        try:
            read = await self._door.read_attachments([path])
        except AttachmentsUnreadable as unreadable:
            reasons = [item.reason for item in unreadable.unreadable]
            reason = reasons[0] if len(reasons) == 1 else str(unreadable)
            return reason[:1].upper() + reason[1:]
        if len(read) != 1:
            raise AssertionError(f"read_attachments gave {len(read)} files for one path")
        return read[0]
