"""The controller's calls for images in a chat, in the one place the window makes them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from app.core.attachments import AttachedImage
from app.service.documents.attached_images import ImagesUnreadable

if TYPE_CHECKING:
    from app.service.controller import ChatController


class Vision(Protocol):
    """Whether the open chat's model can see images (the controller's VisionState)."""

    @property
    def available(self) -> bool: ...

    @property
    def reason(self) -> str: ...


class ChatImagesCalls:
    """What the window asks the controller about images: `read_images(paths)`,
    `read_image_data(data, name)` and `vision()`, with the answers in the window's terms (a
    chip's reason); sending them goes with the files (ChatDocumentsCalls.send). Tests give a
    small stand-in controller with that API (tests/helpers/vision_controller.py)."""

    def __init__(self, controller: ChatController) -> None:
        self._controller = controller

    async def read(self, path: Path) -> AttachedImage | str:
        """The image as checked (off the UI thread), or why it cannot be sent. One a call, so
        that each chip says its own image's reason."""
        try:
            checked = await self._controller.read_images([path])
        except ImagesUnreadable as refused:
            return str(refused)  # sentences that name the image: kept as written
        if len(checked) != 1:
            raise AssertionError(f"read_images gave {len(checked)} images for one path")
        return checked[0]

    async def read_pasted(self, data: bytes, name: str = "Pasted image") -> AttachedImage | str:
        """An image pasted or dropped as data (PNG bytes), as checked, or why it cannot be sent."""
        try:
            return await self._controller.read_image_data(data, name)
        except ImagesUnreadable as refused:
            return str(refused)  # sentences that name the image: kept as written

    def vision(self) -> Vision:
        """Whether the model the open chat answers with can see images, and if not, why (cheap)."""
        return self._controller.vision()

