"""A screenshot for quick ask: the screen with the mouse grabbed, then a region dragged over it."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QCloseEvent, QColor, QCursor, QGuiApplication, QKeyEvent, QMouseEvent, QPainter, QPaintEvent, QPen, QPixmap, QScreen
from PySide6.QtWidgets import QWidget

# A drag shorter than this (logical pixels, either way) is a click: the whole screen.
SMALLEST_DRAG = 8
GRAB_REFUSED = ("Kestrel could not take a screenshot: this desktop does not let programs capture the screen "
                "(Wayland does not, and some desktops ask first). Ask without it, or paste a screenshot taken "
                "with your desktop's own tool into the question (Ctrl+V).")

# What grabs a screen: Qt's own grab unless a test gives another (offscreen, Qt's grab is blank).
GrabScreen = Callable[[QScreen], QPixmap]


def grab_screen(screen: QScreen) -> QPixmap:
    """The whole screen as it is now (null or empty where the desktop refuses, as Wayland does)."""
    return screen.grabWindow(0)


def screen_with_mouse() -> QScreen:
    return QGuiApplication.screenAt(QCursor.pos()) or QGuiApplication.primaryScreen()


def refused(grab: QPixmap) -> bool:
    """The grab came back with nothing in it."""
    return grab.isNull() or grab.width() == 0 or grab.height() == 0


def region_between(start: QPoint, end: QPoint) -> QRect:
    """The region a drag from start to end covers, both points in it, whichever way it went (not
    QRect.normalized(), which moves a rectangle given by its corners the wrong way by one pixel)."""
    return QRect(QPoint(min(start.x(), end.x()), min(start.y(), end.y())),
                 QPoint(max(start.x(), end.x()), max(start.y(), end.y())))


def crop_rect(dragged: QRect, shown: QSize, grabbed: QSize) -> QRect:
    """The part of the grab (in its own pixels) under a region dragged on the overlay (in the
    overlay's logical pixels, which show the whole grab; see region_between): scaled by the grab's
    pixels per logical pixel (2 on a 200% screen), kept inside the grab. A drag shorter than
    SMALLEST_DRAG either way is a click: the whole grab."""
    whole = QRect(QPoint(0, 0), grabbed)
    region = dragged
    if region.width() < SMALLEST_DRAG or region.height() < SMALLEST_DRAG or shown.isEmpty():
        return whole
    sx, sy = grabbed.width() / shown.width(), grabbed.height() / shown.height()
    left, top = round(region.left() * sx), round(region.top() * sy)
    right, bottom = round((region.right() + 1) * sx), round((region.bottom() + 1) * sy)
    return QRect(QPoint(left, top), QPoint(right - 1, bottom - 1)).intersected(whole)


class RegionPicker(QWidget):
    """A full-screen overlay over the screen it was grabbed from, showing the grab dimmed; the
    person drags the region to send, which shows clear; a click without a drag picks the whole screen.
    Esc (or the overlay closed any other way) takes nothing: people press Esc to cancel, and a whole
    screen sent by mistake could show what they did not mean to share. picked(QPixmap): the region,
    cut from the grab; cancelled(): nothing was taken."""

    picked = Signal(QPixmap)
    cancelled = Signal()

    def __init__(self, grab: QPixmap, screen: QScreen) -> None:
        super().__init__(None, Qt.WindowType.FramelessWindowHint | Qt.WindowType.WindowStaysOnTopHint
                         | Qt.WindowType.Tool)
        self.setWindowTitle("Kestrel — Drag over what to ask about")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.setCursor(Qt.CursorShape.CrossCursor)
        self._grab = grab
        self._done = False  # picked or cancelled: said once
        self._start: QPoint | None = None
        self._region = QRect()
        self.setGeometry(screen.geometry())

    def pick(self, dragged: QRect) -> None:
        """Cut the dragged region (logical, as on the overlay) from the grab and close."""
        cut = self._grab.copy(crop_rect(dragged, self.size(), self._grab.size()))
        self._done = True
        self.close()
        self.picked.emit(cut)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # Override: a drag starts.
        self._start = event.position().toPoint()
        self._region = region_between(self._start, self._start)
        self.update()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # Override: the region follows the mouse.
        if self._start is not None:
            self._region = region_between(self._start, event.position().toPoint())
            self.update()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # Override: the drag ends: that region.
        if self._start is not None:
            self.pick(region_between(self._start, event.position().toPoint()))

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Override: Esc takes nothing.
        if event.key() == Qt.Key.Key_Escape:
            self.close()
            return
        super().keyPressEvent(event)

    def closeEvent(self, event: QCloseEvent) -> None:  # Override: closed without a pick, nothing was taken.
        super().closeEvent(event)
        if not self._done:
            self._done = True
            self.cancelled.emit()

    def paintEvent(self, event: QPaintEvent) -> None:  # Override: the grab, dimmed but for the region.
        painter = QPainter(self)
        painter.drawPixmap(self.rect(), self._grab)
        painter.fillRect(self.rect(), QColor(0, 0, 0, 110))
        region = self._region
        if region.width() >= SMALLEST_DRAG and region.height() >= SMALLEST_DRAG:
            source = crop_rect(region, self.size(), self._grab.size())
            painter.drawPixmap(region, self._grab, source)
            painter.setPen(QPen(QColor("white"), 1, Qt.PenStyle.DashLine))
            painter.drawRect(region.adjusted(0, 0, -1, -1))
        else:
            painter.setPen(QColor("white"))
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter,
                             "Drag over what to ask about; a click takes the whole screen, Esc takes nothing.")
        painter.end()
