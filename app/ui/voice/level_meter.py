"""The microphone's live level as a small bar, and the red dot that says the microphone is open."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget

# The meter's range in dB below full scale: speech at a normal distance reads -35 to -15 dBFS, a quiet room
# below -60, so the bar is empty in silence and about two-thirds full for a speaking voice.
QUIETEST_DBFS = -60.0
# The open-microphone dot: red that stands 4.5:1 or more against the composer's field in each theme.
RECORDING_RED = {False: "#c5221f", True: "#ff8a80"}


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Base).lightness() < 128


def fill_of(rms_dbfs: float) -> float:
    """How much of the bar a level fills, from 0 (silence) to 1 (full scale)."""
    return min(1.0, max(0.0, (rms_dbfs - QUIETEST_DBFS) / -QUIETEST_DBFS))


class LevelMeter(QWidget):
    """A rounded bar, filled as loud as the microphone is now (set_level, about 30 times a second)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._fill = 0.0
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.setAccessibleName("Microphone level")

    def sizeHint(self) -> QSize:  # Override QWidget.sizeHint: as wide as a short word, a third of a line high.
        line = self.fontMetrics().height()
        return QSize(5 * line, max(6, line // 3))

    @property
    def fill(self) -> float:
        return self._fill

    def set_level(self, rms_dbfs: float | None) -> None:
        fill = 0.0 if rms_dbfs is None else fill_of(rms_dbfs)
        if abs(fill - self._fill) >= 0.01:
            self._fill = fill
            self.update()

    def paintEvent(self, event: QPaintEvent) -> None:  # Override QWidget.paintEvent.
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        bar = QRectF(self.rect())
        radius = bar.height() / 2
        painter.setBrush(self.palette().color(QPalette.ColorRole.Mid))
        painter.drawRoundedRect(bar, radius, radius)
        if self._fill > 0:
            painter.setBrush(self.palette().color(QPalette.ColorRole.Highlight))
            painter.drawRoundedRect(QRectF(bar.x(), bar.y(), max(bar.height(), bar.width() * self._fill),
                                           bar.height()), radius, radius)


class RecordingDot(QWidget):
    """A red dot, shown exactly while the microphone is open."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.setAccessibleName("The microphone is on")

    def sizeHint(self) -> QSize:  # Override QWidget.sizeHint: a dot about as big as a capital letter.
        side = max(8, self.fontMetrics().capHeight() + 2)
        return QSize(side, side)

    def paintEvent(self, event: QPaintEvent) -> None:  # Override QWidget.paintEvent.
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(RECORDING_RED[is_dark(self.palette())]))
        painter.drawEllipse(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5))
