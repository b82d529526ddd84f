"""An image attached in the window, checked by the image check, with a refusal in a chip's words."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.core.attachments import AttachedImage
from app.service.documents.attached_images import ImagesUnreadable

if TYPE_CHECKING:
    from app.service.doors.attach import AttachDoor


class ChatImagesCalls:
    """Checks each image through AttachDoor's `read_images` (a file) or `read_image_data` (pasted
    or dropped bytes), one a call, so that each chip says its own image's reason; sending them
    goes with the files (ChatDoor.send). Tests give a small stand-in door
    (tests/helpers/vision_controller.py)."""

    def __init__(self, door: AttachDoor) -> None:
        self._door = door

    async def read(self, path: Path) -> AttachedImage | str:
        """The image as checked (off the UI thread), or why it cannot be sent."""
        try:
            checked = await self._door.read_images([path])
        except ImagesUnreadable as refused:
            return str(refused)  # sentences that name the image: kept as written
        if len(checked) != 1:
            raise AssertionError(f"read_images gave {len(checked)} images for one path")
        return checked[0]

    async def read_pasted(self, data: bytes, name: str = "Pasted image") -> AttachedImage | str:
        """An image pasted or dropped as data (PNG bytes), as checked, or why it cannot be sent."""
        try:
            return await self._door.read_image_data(data, name)
        except ImagesUnreadable as refused:
            return str(refused)  # sentences that name the image: kept as written
