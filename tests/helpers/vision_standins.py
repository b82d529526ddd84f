"""Until the image core (branch vision-core) is merged: its names the window imports, as its plan
writes them, put in place only where they are missing. Call install() before anything imports app.ui.

Once app.service.images and app.core.attachments' IMAGE_SUFFIXES / is_image_path / MAX_IMAGES
exist, install() does nothing (and this module can go).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from dataclasses import dataclass

import app.core.attachments as attachments


@dataclass(frozen=True)
class Vision:
    """What controller.vision() answers (the window reads these two)."""

    available: bool
    reason: str


def install() -> None:
    """The image core's names where they are missing; idempotent."""
    if "app.service.images" not in sys.modules and importlib.util.find_spec("app.service.images") is None:
        _service_standins()
    if not hasattr(attachments, "is_image_path"):
        _core_standins()
    _controller_standins()


def _service_standins() -> None:
    images = types.ModuleType("app.service.images")

    class ImagesUnreadable(Exception):
        """One or more images the check refused; str() names each and why (vision-core's signature)."""

        def __init__(self, refused: tuple[object, ...], words: str | None = None) -> None:
            self.refused = refused
            super().__init__(words or "")

    ImagesUnreadable.__module__ = "app.service.images"
    images.ImagesUnreadable = ImagesUnreadable  # type: ignore[attr-defined]
    sys.modules["app.service.images"] = images


def _core_standins() -> None:
    suffixes = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp")

    def is_image_path(path: str | os.PathLike[str]) -> bool:
        return os.fspath(path).lower().endswith(suffixes)

    attachments.IMAGE_SUFFIXES = suffixes  # type: ignore[attr-defined]
    attachments.MAX_IMAGES = 8  # type: ignore[attr-defined]
    attachments.is_image_path = is_image_path  # type: ignore[attr-defined]


def checked(data: bytes, name: str) -> "attachments.AttachedImage":
    """The stand-in image check: Qt decodes it, or it is refused with words naming it (the real
    check runs in a child process with Pillow and scales and re-encodes; this keeps the bytes)."""
    from PySide6.QtGui import QImage

    from app.ui.chat_images_calls import ImagesUnreadable as Refused  # the class the window catches

    image = QImage.fromData(data)
    if image.isNull():
        raise Refused((), f"{name} is not an image Kestrel can read. Open it in an image viewer and "
                          "save it as PNG or JPEG, then add it again.")
    mime = "image/jpeg" if data[:3] == b"\xff\xd8\xff" else "image/png"
    return attachments.AttachedImage(name, mime, image.width(), image.height(), data)


def _controller_standins() -> None:
    """The controller's image calls, where it has none yet: every model sees, the check is `checked`,
    and send takes images and leaves them out (the history keeps none before vision-core)."""
    import asyncio
    import inspect
    from pathlib import Path
    from typing import Any

    from app.service.controller import ChatController
    def vision(self: ChatController) -> Any:
        return Vision(True, "")

    async def read_images(self: ChatController, paths: list[Path]) -> tuple[Any, ...]:
        found = [(path, await asyncio.to_thread(path.read_bytes)) for path in paths]
        return tuple(checked(data, path.name) for path, data in found)

    async def read_image_data(self: ChatController, data: bytes, name: str = "Pasted image") -> Any:
        return checked(data, name)

    for name, standin in (("vision", vision), ("read_images", read_images), ("read_image_data", read_image_data)):
        if not hasattr(ChatController, name):
            setattr(ChatController, name, standin)
    if "images" not in inspect.signature(ChatController.send).parameters:
        send_text = ChatController.send

        def send(self: ChatController, text: str, attachments: Any = (), images: Any = ()) -> bool:
            return send_text(self, text or ("Describe the attached image." if images else ""), attachments)

        ChatController.send = send  # type: ignore[method-assign]

