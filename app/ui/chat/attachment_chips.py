"""Files attached to the next message, as chips above the composer's box: being read, read, or refused."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from enum import Enum
from pathlib import Path
from typing import Any

from PySide6.QtCore import QMimeData, QPoint, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLayout, QLayoutItem, QToolButton, QWidget

from app.core.attachments import AttachedFile, AttachedImage
from app.ui.common import icons
from app.ui.state.message_words import attachment_label

# A chip's words are cut (in the middle: the name's end and the facts stay) past this width.
TEXT_WIDTH = 260
GAP = 6
# Refused files' colour: 5.9:1 on the light field, and a light red for the dark one.
_REFUSED = {False: "#b3261e", True: "#ff8a80"}
# The clip test (tests/helpers/clip_probe.py) passes a label that elides on purpose.
ELIDES = "elidesOnPurpose"


class ChipState(Enum):
    READING = "reading"
    READY = "ready"
    REFUSED = "refused"


def local_files(mime: QMimeData) -> list[Path]:
    """The local files a drop or a paste carries (a file manager's copy: its URLs); [] for none."""
    if not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile() and url.toLocalFile()]


class Chip(QWidget):
    """A rounded chip for something going with the next message: its words, × to take it away,
    and its state (being read, read, or refused: red, with the reason whole). The kind of chip
    says what read means: `file` (AttachmentChip) or `image` (ImageChip in image_chips.py)."""

    removeRequested = Signal()

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentChip")
        self.state = ChipState.READING
        self.file: AttachedFile | None = None
        self.image: AttachedImage | None = None
        self.reason = ""
        self.kind = "file"
        self.label = QLabel(self)
        self.label.setProperty(ELIDES, True)
        self.remove_button = QToolButton(self)
        self.remove_button.setObjectName("removeAttachment")
        self.remove_button.setAutoRaise(True)
        self.remove_button.setIconSize(QSize(12, 12))
        icons.themed(self.remove_button, "close")
        self.remove_button.setAccessibleName(f"Remove {name}")
        self.remove_button.setToolTip(f"Remove {name}: it is not sent")
        self.remove_button.clicked.connect(self.removeRequested)
        self.row = QHBoxLayout(self)
        self.row.setContentsMargins(10, 3, 3, 3)
        self.row.setSpacing(2)
        self.row.addWidget(self.label)
        self.row.addWidget(self.remove_button)

    def _show(self, text: str, tip: str) -> None:
        if self.state == ChipState.REFUSED:
            # The reason whole, on as many lines as it takes: a reason cut short says nothing.
            self.label.setWordWrap(True)
            self.label.setFixedWidth(min(TEXT_WIDTH, self.label.fontMetrics().horizontalAdvance(text) + 2))
            self.label.setText(text)
        else:
            self.label.setText(self.label.fontMetrics().elidedText(text, Qt.TextElideMode.ElideMiddle, TEXT_WIDTH))
        self.label.setToolTip(tip)
        self.setAccessibleName(text)
        self._colour_text()

    def _colour_text(self) -> None:
        palette = QPalette(self.palette())
        if self.state == ChipState.REFUSED:
            palette.setColor(QPalette.ColorRole.WindowText, self.refused_colour())
        self.label.setPalette(palette)

    def refused_colour(self) -> QColor:
        return QColor(_REFUSED[self.palette().color(QPalette.ColorRole.Base).lightnessF() < 0.5])

    def changeEvent(self, event: Any) -> None:  # Override: a theme change recolours a refused chip.
        super().changeEvent(event)
        if event.type() == event.Type.PaletteChange and self.state == ChipState.REFUSED:
            self._colour_text()

    def paintEvent(self, event: QPaintEvent) -> None:  # Override: a rounded chip.
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        palette = self.palette()
        border = self.refused_colour() if self.state == ChipState.REFUSED else palette.color(QPalette.ColorRole.Mid)
        painter.setPen(border)
        painter.setBrush(palette.color(QPalette.ColorRole.AlternateBase))
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 9, 9)

    def set_read(self, result: Any) -> None:
        """What reading it gave: the thing read, or the words why it cannot be sent."""
        raise NotImplementedError


class AttachmentChip(Chip):
    """One file: "Reading…" while the document reader reads it, then its facts ("report.pdf · 12 pages"),
    or red with the reason it cannot be sent. × takes it away."""

    def __init__(self, path: Path, parent: QWidget | None = None) -> None:
        super().__init__(path.name, parent)
        self.path = path
        self._show(f"{path.name} · Reading…", str(path))

    def set_read(self, result: AttachedFile | str) -> None:
        """The file as read (its facts), or the words why it cannot be (the chip turns red)."""
        if isinstance(result, AttachedFile):
            self.state, self.file = ChipState.READY, result
            note = f"\n{result.note}" if result.note else ""
            self._show(attachment_label(result), f"{result.path}{note}")
        else:
            self.state, self.reason = ChipState.REFUSED, result
            self._show(f"{self.path.name} · {result}", f"{self.path}\n{result}\nIt will not be sent: remove it (×).")
        self.update()


class FlowLayout(QLayout):
    """Items left to right, wrapping to a new line when the width runs out (Qt's flow layout example)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:  # Override QLayout.addItem.
        self._items.append(item)

    def count(self) -> int:  # Override QLayout.count.
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:  # Override QLayout.itemAt.
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:  # Override QLayout.takeAt.
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:  # Override QLayout.expandingDirections.
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:  # Override QLayout.hasHeightForWidth.
        return True

    def heightForWidth(self, width: int) -> int:  # Override QLayout.heightForWidth.
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:  # Override QLayout.setGeometry.
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:  # Override QLayout.sizeHint.
        return self.minimumSize()

    def minimumSize(self) -> QSize:  # Override QLayout.minimumSize.
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        return size

    def _place(self, rect: QRect, move: bool) -> int:
        x, y, line = rect.x(), rect.y(), 0
        for item in self._items:
            hint = item.sizeHint()
            if item.hasHeightForWidth():  # a refused chip's wrapped reason
                hint.setHeight(max(hint.height(), item.heightForWidth(hint.width())))
            if x + hint.width() > rect.right() + 1 and line > 0:
                x, y, line = rect.x(), y + line + GAP, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + GAP
            line = max(line, hint.height())
        return y + line - rect.y()


class AttachmentTray(QWidget):
    """The chips of the files for the next message; hidden while there are none.

    `changed` says a chip came, went or was read: what Send may do changes with it.
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentTray")
        self._flow = FlowLayout(self)
        self.chips: list[Chip] = []
        self._removed: weakref.WeakSet[Chip] = weakref.WeakSet()
        self.hide()

    def attach(self, paths: list[Path], read: Callable[[Path], Awaitable[AttachedFile | str]],
               spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]) -> None:
        """A chip for each file not already here, each read by `read` (the document reader,
        off the UI thread) in a task `spawn` starts."""
        for path in paths:
            if any(isinstance(chip, AttachmentChip) and chip.path == path for chip in self.chips):
                continue
            chip = AttachmentChip(path, self)
            self.add(chip, read(path), spawn)

    def add(self, chip: Chip, reading: Awaitable[Any] | None,
            spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]) -> None:
        """A chip (made with this tray as its parent), settled by what `reading` gives (a task
        `spawn` starts); None: the chip is settled already (refused before any reading)."""
        chip.removeRequested.connect(lambda chip=chip: self.remove(chip))
        self.chips.append(chip)
        self._flow.addWidget(chip)
        if reading is not None:
            spawn(self._read(chip, reading))
        self._changed()

    async def _read(self, chip: Chip, reading: Awaitable[Any]) -> None:
        try:
            result = await reading
        except Exception:
            # A bug, not the file: it still raises (and is logged), but Send must not wait for it forever.
            self._settle(chip, "Kestrel failed while reading it (a fault in Kestrel, written to its log)")
            raise
        self._settle(chip, result)

    def _settle(self, chip: Chip, result: object) -> None:
        if chip in self._removed:
            return  # removed while it was read (its widget is gone)
        chip.set_read(result)  # here, or kept aside with another chat (take): read all the same
        if chip in self.chips:
            self._changed()

    def remove(self, chip: Chip) -> None:
        if chip in self.chips:
            self.chips.remove(chip)
            self._removed.add(chip)
            self._flow.removeWidget(chip)
            chip.deleteLater()
            self._changed()

    def take(self) -> list[Chip]:
        """The chips taken out of the tray, kept as they are (another chat opens: they wait for
        this one's next message), still read if they were being read; `put` brings them back."""
        taken, self.chips = self.chips, []
        for chip in taken:
            self._flow.removeWidget(chip)
            chip.hide()
        self._changed()
        return taken

    def put(self, chips: list[Chip]) -> None:
        """Chips `take` took, back in the tray."""
        for chip in chips:
            self.chips.append(chip)
            self._flow.addWidget(chip)
            chip.show()
        self._changed()

    def clear(self) -> None:
        """The message was sent: the next one starts with none."""
        for chip in list(self.chips):
            self.remove(chip)

    def ready(self) -> tuple[AttachedFile, ...]:
        """The files read, in the order attached (refused ones are not sent)."""
        return tuple(chip.file for chip in self.chips if chip.file is not None)

    def images(self) -> tuple[AttachedImage, ...]:
        """The images checked, in the order attached (refused ones are not sent)."""
        return tuple(chip.image for chip in self.chips if chip.image is not None)

    def image_count(self) -> int:
        """The images waiting for the next message, refused ones not counted (they are not sent)."""
        return sum(1 for chip in self.chips if chip.kind == "image" and chip.state != ChipState.REFUSED)

    def reading(self) -> bool:
        return any(chip.state == ChipState.READING for chip in self.chips)

    def _changed(self) -> None:
        self.setVisible(bool(self.chips))
        self.updateGeometry()
        self.changed.emit()
