"""The image calls the window makes of its doors (AttachDoor's read_images, read_image_data and
vision, ChatDoor's send(text, attachments, images)) held by a test: what vision() answers, when a
check finishes, what send was given.

The check here decodes with Qt and refuses what Qt cannot decode, at once and in this process
(the service's own check runs in a child process with Pillow: tests/ui/test_images.py drives
that one too). What it gives back is a real AttachedImage of the file's own bytes, so thumbnails
and the viewer draw real pixels.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from PySide6.QtCore import QBuffer, QIODevice, Qt
from PySide6.QtGui import QColor, QImage, QPainter

from app.core.attachments import AttachedImage
from app.service.chats.vision import VisionState as Vision


def checked(data: bytes, name: str) -> AttachedImage:
    """The test's image check: Qt decodes it, or it is refused with words naming it (the
    service's own check scales and re-encodes; this keeps the bytes)."""
    from app.ui.chat.chat_images_calls import ImagesUnreadable as Refused  # the class the window catches

    image = QImage.fromData(data)
    if image.isNull():
        raise Refused((), f"{name} is not an image Kestrel can read. Open it in an image viewer and "
                          "save it as PNG or JPEG, then add it again.")
    mime = "image/jpeg" if data[:3] == b"\xff\xd8\xff" else "image/png"
    return AttachedImage(name, mime, image.width(), image.height(), data)


def png_image(width: int, height: int, colour: str = "#3a7bd5") -> bytes:
    """A real PNG of that size: a colour with a disc in it (so a scaled one is not one flat colour)."""
    image = QImage(width, height, QImage.Format.Format_RGB32)
    image.fill(QColor(colour))
    painter = QPainter(image)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor("#f5c542"))
    painter.drawEllipse(width // 4, height // 4, width // 2, height // 2)
    painter.end()
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(buffer.data().data())


class ImageApi:
    """Puts the image calls on `attach` (the attach door, or a stand-in) and a recording send on
    `chat` (the chat door): their own attributes, so the window calls them by their real names.
    `vision` is what vision() answers; `sent` records each send's (text, attachments, images);
    `accept`, when set, is what send answers instead of passing the message on (the chat door's
    own send refuses images for a model without a projector); `release`, when set, is awaited
    before each check (the chip says Checking… meanwhile)."""

    def __init__(self, attach: Any, chat: Any, available: bool = True, reason: str = "",
                 accept: bool | None = None) -> None:
        self.chat = chat
        self.vision = Vision(available, reason)
        self.sent: list[tuple[str, tuple[Any, ...], tuple[AttachedImage, ...]]] = []
        self.release: asyncio.Event | None = None
        self.checks = 0
        self._send = chat.send
        self.accept = accept  # what send answers without passing the message on; None: the door's own send
        attach.read_images = self.read_images
        attach.read_image_data = self.read_image_data
        attach.vision = lambda: self.vision
        chat.send = self.send

    def set_vision(self, available: bool, reason: str = "") -> None:
        self.vision = Vision(available, reason)

    async def read_images(self, paths: list[Path]) -> tuple[AttachedImage, ...]:
        self.checks += 1
        if self.release is not None:
            await self.release.wait()
        found = [(path, await asyncio.to_thread(path.read_bytes)) for path in paths]
        return tuple(checked(data, path.name) for path, data in found)

    async def read_image_data(self, data: bytes, name: str = "Pasted image") -> AttachedImage:
        self.checks += 1
        if self.release is not None:
            await self.release.wait()
        return checked(data, name)

    def send(self, text: str, attachments: tuple[Any, ...] = (), images: tuple[AttachedImage, ...] = ()) -> bool:
        self.sent.append((text, tuple(attachments), tuple(images)))
        if self.accept is not None:
            return self.accept
        return bool(self._send(text, tuple(attachments), tuple(images)))
