"""Images for the next message, as chips with a thumbnail: being checked, checked, or refused."""

from __future__ import annotations

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMimeData, Qt
from PySide6.QtGui import QImage, QImageWriter, QPixmap
from PySide6.QtWidgets import QLabel, QWidget

from app.core.attachments import AttachedImage
from app.ui.chat.attachment_chips import Chip, ChipState
from app.ui.state.message_words import image_size_words

# A chip's thumbnail is this tall (logical pixels); its width keeps the image's shape, up to twice that.
THUMB_HEIGHT = 48


def thumbnail(data: bytes, height: int, ratio: float = 1.0) -> QPixmap:
    """A checked image's PNG or JPEG bytes as a pixmap `height` logical pixels tall (sharp at
    `ratio`, the screen's device pixel ratio), its shape kept; an empty pixmap if Qt cannot
    decode them. The check already bounded them (at most 1536 px a side), so decoding them on
    the UI thread is quick."""
    image = QImage.fromData(data)
    if image.isNull():
        return QPixmap()
    scaled = image.scaledToHeight(max(1, round(height * ratio)), Qt.TransformationMode.SmoothTransformation)
    if scaled.width() > 2 * height * ratio:
        scaled = image.scaled(round(2 * height * ratio), round(height * ratio), Qt.AspectRatioMode.KeepAspectRatio,
                              Qt.TransformationMode.SmoothTransformation)
    pixmap = QPixmap.fromImage(scaled)
    pixmap.setDevicePixelRatio(ratio)
    return pixmap


def png_bytes(image: QImage) -> bytes:
    """An image from the clipboard as PNG bytes (what the image check takes).

    Runs off the UI thread (a screenshot of a large screen takes a while to encode): QImage
    may be read from another thread.
    """
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    QImageWriter(buffer, QByteArray(b"png")).write(image)
    return bytes(buffer.data().data())


def pasted_image(mime: QMimeData) -> bytes | QImage | None:
    """The image a paste or a drop carries: its PNG bytes when it has them as such (no encoding
    needed), else the QImage to encode (png_bytes, off the UI thread); None for no image."""
    if mime.hasFormat("image/png"):
        data: QByteArray = mime.data("image/png")
        if not data.isEmpty():
            return bytes(data.data())
    if not mime.hasImage():
        return None
    image = mime.imageData()
    return image if isinstance(image, QImage) and not image.isNull() else None


class ImageChip(Chip):
    """One image: "Checking…" while it is checked, then a thumbnail with its name and
    size ("photo.jpg · 1536 x 1024"), or red with the reason it cannot be sent. × takes it away.
    `where` is the file's path, or where it came from ("Pasted from the clipboard")."""

    def __init__(self, name: str, where: str, parent: QWidget | None = None) -> None:
        super().__init__(name, parent)
        self.setObjectName("imageChip")
        self.kind = "image"
        self.name, self.where = name, where
        self.thumb = QLabel(self)
        self.thumb.setObjectName("imageThumbnail")
        self.thumb.hide()
        self.row.insertWidget(0, self.thumb)
        self._show(f"{name} · Checking…", where)

    def set_read(self, result: AttachedImage | str) -> None:
        """The image as checked (its thumbnail and size), or the words why it cannot be sent (red)."""
        if isinstance(result, AttachedImage):
            self.state, self.image = ChipState.READY, result
            ratio = self.devicePixelRatioF()
            self.thumb.setPixmap(thumbnail(result.data, THUMB_HEIGHT, ratio))
            if not self.thumb.pixmap().isNull():
                self.thumb.show()
                self.row.setContentsMargins(4, 3, 3, 3)  # the thumbnail's corner sits inside the chip's curve
                self.row.setSpacing(6)
            note = f"\n{result.note}" if result.note else ""
            self._show(f"{result.name} · {image_size_words(result)}", f"{self.where}{note}")
        else:
            self.state, self.reason = ChipState.REFUSED, result
            # The check's words name the image already ("photo.jpg cannot be used: …"); a reason of the window's does not.
            text = result if result.startswith(self.name) else f"{self.name} · {result}"
            self._show(text, f"{self.where}\n{result}\nIt will not be sent: remove it (×).")
        self.updateGeometry()
        self.update()
