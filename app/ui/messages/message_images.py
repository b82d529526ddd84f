"""The images on a user's message: thumbnails under the bubble, each opening the image viewer."""

from __future__ import annotations

from collections import OrderedDict

from PySide6.QtCore import QPoint, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QImage, QPainter, QPainterPath, QPalette, QPixmap

from app.core.attachments import AttachedImage
from app.core.conversation import Message, Role
from app.ui.messages.message_layout import DOCUMENTS_GAP

GAP = DOCUMENTS_GAP
MAX_WIDTH = 240  # a thumbnail's box; the image keeps its shape inside it
MAX_HEIGHT = 180
RADIUS = 8
# Decoded thumbnails kept (a chat's worth): decoding one takes a few milliseconds.
_KEPT = 64


def thumb_size(image: AttachedImage, limit: int) -> QSize:
    """How big an image's thumbnail is in a column `limit` wide: its shape, never bigger than it is.

    From the width and height the image check recorded, not from decoding: a row's height is
    known before its images are painted, so nothing moves when they are.
    """
    width = max(1, min(MAX_WIDTH, limit))
    scale = min(width / max(1, image.width), MAX_HEIGHT / max(1, image.height), 1.0)
    return QSize(max(1, round(image.width * scale)), max(1, round(image.height * scale)))


def scaled_pixmap(data: bytes, size: QSize, ratio: float) -> QPixmap:
    """Checked PNG or JPEG bytes as a pixmap of `size` logical pixels, sharp at the screen's
    `ratio`; an empty pixmap when Qt cannot decode them."""
    image = QImage.fromData(data)
    if image.isNull():
        return QPixmap()
    scaled = image.scaled(QSize(round(size.width() * ratio), round(size.height() * ratio)),
                          Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
    pixmap = QPixmap.fromImage(scaled)
    pixmap.setDevicePixelRatio(ratio)
    return pixmap


class MessageImages:
    """Where a message's thumbnails go, their decoded pixmaps (once each), and how they are painted."""

    def __init__(self) -> None:
        # (message id, position) -> (the image decoded, its pixmap at (size, ratio)); the image is
        # kept to tell an edited message's new image from the old one.
        self._pixmaps: OrderedDict[tuple[int, int], tuple[AttachedImage, tuple[QSize, float], QPixmap]] = OrderedDict()

    def places(self, message: Message, area: QRect) -> list[QRect]:
        """Each image's rect in area (its top and width: the column), in lines; at the right
        under a user's bubble."""
        if message.role != Role.USER or not message.images:
            return []
        sizes = [thumb_size(image, area.width()) for image in message.images]
        lines: list[list[QSize]] = [[]]
        used = 0
        for size in sizes:
            if lines[-1] and used + size.width() > area.width():
                lines.append([])
                used = 0
            lines[-1].append(size)
            used += size.width() + GAP
        placed: list[QRect] = []
        top = area.top()
        for line in lines:
            x = area.right() + 1 - (sum(size.width() for size in line) + GAP * (len(line) - 1))
            for size in line:
                placed.append(QRect(QPoint(x, top), size))
                x += size.width() + GAP
            top += max(size.height() for size in line) + GAP
        return placed

    def height(self, message: Message, width: int) -> int:
        """The thumbnails' height, with the gap under them (0: no images)."""
        placed = self.places(message, QRect(0, 0, width, 0))
        return max(rect.bottom() + 1 for rect in placed) + GAP if placed else 0

    def image_at(self, message: Message, area: QRect, point: QPoint) -> int | None:
        """Which image (its position in the message's images) is under a point."""
        for number, rect in enumerate(self.places(message, area)):
            if rect.contains(point):
                return number
        return None

    def pixmap(self, message: Message, number: int, size: QSize, ratio: float) -> QPixmap:
        """An image's thumbnail, decoded the first time it is painted at that size."""
        image = message.images[number]
        key = (message.id, number)
        kept = self._pixmaps.get(key)
        if kept is not None and kept[0] is image and kept[1] == (size, ratio):
            self._pixmaps.move_to_end(key)
            return kept[2]
        pixmap = scaled_pixmap(image.data, size, ratio)
        self._pixmaps[key] = (image, (size, ratio), pixmap)
        while len(self._pixmaps) > _KEPT:
            self._pixmaps.popitem(last=False)
        return pixmap

    def paint(self, painter: QPainter, message: Message, area: QRect, palette: QPalette) -> None:
        placed = self.places(message, area)
        if not placed:
            return
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        ratio = painter.device().devicePixelRatioF() if painter.device() is not None else 1.0
        for number, rect in enumerate(placed):
            shape = QPainterPath()
            shape.addRoundedRect(QRectF(rect), RADIUS, RADIUS)
            pixmap = self.pixmap(message, number, rect.size(), ratio)
            painter.save()
            painter.setClipPath(shape)
            if pixmap.isNull():  # not an image Qt decodes: its name in its place
                painter.fillRect(rect, palette.color(QPalette.ColorRole.AlternateBase))
                painter.setPen(palette.color(QPalette.ColorRole.Text))
                painter.drawText(rect.adjusted(6, 0, -6, 0), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
                                 message.images[number].name)
            else:
                painter.drawPixmap(rect, pixmap)
            painter.restore()
            painter.setPen(palette.color(QPalette.ColorRole.Mid))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(QRectF(rect).adjusted(0.5, 0.5, -0.5, -0.5), RADIUS, RADIUS)
        painter.restore()
