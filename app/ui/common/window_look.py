"""Every dialog the window opens, made to look and sit right: on screen over its parent, text not cut, a dark title bar.

DialogLook watches the main window for the dialogs it (or one of its dialogs) parents
and fixes each as it is shown, so that a QMessageBox or Qt's own file dialog opened
anywhere in app/ui gets the same treatment as the app's own dialogs. It filters the
events of those windows only, never the whole application's.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from PySide6.QtCore import QDate, QDateTime, QEvent, QLocale, QMargins, QObject, QPoint, QRect, QSize, QTime
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QAbstractButton, QCheckBox, QDialog, QFileDialog, QLabel, QRadioButton, QTreeView, QWidget

# DwmSetWindowAttribute's DWMWA_USE_IMMERSIVE_DARK_MODE: 20 since Windows 10 20H1, 19 before.
DARK_MODE_ATTRIBUTES = (20, 19)
# The frame a window manager adds, guessed before a window has one: a title bar and thin edges.
_GUESSED_FRAME = QMargins(1, 32, 1, 1)
_PLACED = "kestrelPlaced"


class DialogLook(QObject):
    """Install on the main window (watch()); it follows the dialogs parented under it."""

    def watch(self, window: QWidget) -> None:
        window.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Override QObject.eventFilter.
        kind = event.type()
        if kind == QEvent.Type.ChildPolished:
            child = event.child()  # type: ignore[attr-defined]
            if isinstance(child, QDialog):
                child.installEventFilter(self)
        elif kind == QEvent.Type.Show and isinstance(watched, QWidget) and watched.isWindow():
            if isinstance(watched, QDialog):
                fit_shortcut_letters(watched)
                if isinstance(watched, QFileDialog):
                    widen_date_column(watched)
                place(watched)
            use_dark_title_bar(watched, is_dark(watched.palette()))
        elif kind == QEvent.Type.PaletteChange and isinstance(watched, QWidget) and watched.isWindow() \
                and watched.isVisible():
            use_dark_title_bar(watched, is_dark(watched.palette()))
        return False


# --- text not cut ---------------------------------------------------------------------------


def shortcut_letter_extra(widget: QLabel | QAbstractButton) -> int:
    """How much wider widget's text is drawn than Qt measures it, its shortcut letter underlined.

    The underline splits the text there, so the letters either side lose their kerning:
    "&Temperature" and "T&ools" are drawn 1-2 px wider than their size hint, and a label
    exactly that wide cuts its last letter.
    """
    text = widget.text()
    at = text.replace("&&", "\0\0").find("&")
    if at < 0 or at + 1 >= len(text):
        return 0
    metrics = widget.fontMetrics()
    parts = [part.replace("&&", "&") for part in (text[:at], text[at + 1], text[at + 2:])]
    split = sum(metrics.horizontalAdvance(part) for part in parts if part)
    return max(0, split - metrics.horizontalAdvance("".join(parts)))


def fit_shortcut_letters(root: QWidget) -> None:
    """Give each label, check box and radio button in root the width its underlined
    shortcut letter costs (push buttons have room to spare around their text)."""
    for widget in root.findChildren(QWidget):
        if isinstance(widget, (QLabel, QCheckBox, QRadioButton)) and not getattr(widget, "wordWrap", bool)():
            extra = shortcut_letter_extra(widget)
            if extra:
                widget.setMinimumWidth(max(widget.minimumWidth(), widget.sizeHint().width() + extra))


def widen_date_column(dialog: QFileDialog) -> None:
    """Qt's own file dialog: the "Date Modified" column as wide as a date in the system's
    locale (the one its file list writes dates in), so that none is cut."""
    view = dialog.findChild(QTreeView, "treeView")
    if view is None or view.header().count() < 4:
        return
    widest = QDateTime(QDate(2026, 12, 28), QTime(23, 58, 58))  # two-digit day, month and hour
    sample = QLocale.system().toString(widest, QLocale.FormatType.ShortFormat)
    needed = view.fontMetrics().horizontalAdvance(sample) + 24
    growth = needed - view.header().sectionSize(3)
    if growth > 0:
        view.header().resizeSection(3, needed)
        dialog.resize(dialog.width() + growth, dialog.height())  # the other columns keep their room


# --- on screen ------------------------------------------------------------------------------


def placed_at(size: QSize, frame: QMargins, over: QRect | None, available: QRect) -> QPoint:
    """Where a window of size (frame outside it) goes: centred over `over` (or the
    available area), then moved wholly into available, its title bar first.

    Returns the frame's top-left, as QWidget.move() takes it for a window.
    """
    width = size.width() + frame.left() + frame.right()
    height = size.height() + frame.top() + frame.bottom()
    centre = (over if over is not None else available).center()
    x = centre.x() - width // 2
    y = centre.y() - height // 2
    x = max(available.left(), min(x, available.left() + available.width() - width))
    y = max(available.top(), min(y, available.top() + available.height() - height))
    return QPoint(x, y)


def place(dialog: QWidget) -> None:
    """Centre dialog over its parent's window on its first showing; on every showing keep it
    on the screen that window is on (the screen under it, or the primary one)."""
    owner = dialog.parentWidget()
    parent = owner.window() if owner is not None else None
    over = parent.frameGeometry() if parent is not None and parent.isVisible() else None
    screen = None
    if over is not None and parent is not None:
        screen = QGuiApplication.screenAt(over.center()) or parent.screen()
    screen = screen or QGuiApplication.screenAt(dialog.frameGeometry().center()) or QGuiApplication.primaryScreen()
    if screen is None:
        return
    frame = _frame_of(dialog, parent)
    if dialog.property(_PLACED):
        # Shown again: where the user left it, unless that is now off screen.
        over = QRect(dialog.pos(), dialog.size().grownBy(frame))
        if screen.availableGeometry().contains(over):
            return
    dialog.setProperty(_PLACED, True)
    dialog.move(placed_at(dialog.size(), frame, over, screen.availableGeometry()))


def _frame_of(window: QWidget, parent: QWidget | None) -> QMargins:
    """The frame around window, or around its parent while window has none yet."""
    for candidate in (window, parent):
        if candidate is not None and candidate.isVisible():
            outer, inner = candidate.frameGeometry(), candidate.geometry()
            margins = QMargins(inner.left() - outer.left(), inner.top() - outer.top(),
                               outer.right() - inner.right(), outer.bottom() - inner.bottom())
            if margins.top() > 0:
                return margins
    return _GUESSED_FRAME


# --- the title bar --------------------------------------------------------------------------


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def use_dark_title_bar(window: QWidget, dark: bool, *, platform: str = sys.platform, dwmapi: Any = None) -> bool:
    """On Windows, ask for the dark title bar (its caption and close X light) while the
    theme is dark: the app's own dark choice does not reach the title bar by itself.
    Elsewhere the window manager draws the title bar; returns whether it was asked."""
    if platform != "win32":
        return False
    if dwmapi is None:
        dwmapi = getattr(ctypes, "windll").dwmapi
    handle = ctypes.c_void_p(int(window.winId()))
    value = ctypes.c_int(1 if dark else 0)
    for attribute in DARK_MODE_ATTRIBUTES:
        # S_OK is 0; an older build refuses 20 and knows the same switch as 19.
        if dwmapi.DwmSetWindowAttribute(handle, ctypes.c_uint(attribute), ctypes.byref(value),
                                        ctypes.sizeof(value)) == 0:
            return True
    return False
