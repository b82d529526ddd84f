"""The window's icons: Phosphor (MIT) through QtAwesome, drawn in the theme's colours.

Icons are font glyphs, so they are sharp at any scale (200% included). A widget or
action given an icon with `themed()` is drawn again in the new colours when the theme
changes (`refresh()`); a delegate that paints icons itself asks `pixmap()` at paint time.
"""

from __future__ import annotations

import os
import weakref

# QtAwesome reaches Qt through QtPy, which would take PyQt if that were installed too.
os.environ.setdefault("QT_API", "pyside6")

import qtawesome  # type: ignore[import-untyped]  # noqa: E402 - after QT_API

from PySide6.QtCore import QSize  # noqa: E402
from PySide6.QtGui import QAction, QColor, QGuiApplication, QIcon, QPalette, QPixmap  # noqa: E402
from PySide6.QtWidgets import QAbstractButton  # noqa: E402

from app.core.resources import resource_path  # noqa: E402

# What each icon is for -> its Phosphor glyph. Callers name the purpose, never the glyph.
GLYPHS = {
    "copy": "ph.copy",
    "regenerate": "ph.arrow-clockwise",
    "edit": "ph.pencil-simple",
    "send": "ph.paper-plane-right",
    "stop": "ph.stop",
    "new-chat": "ph.note-pencil",
    "search": "ph.magnifying-glass",
    "settings": "ph.gear-six",
    "chat-settings": "ph.sliders-horizontal",
    "model": "ph.cube",
    "models": "ph.cube",
    "cpu": "ph.cpu",
    "gpu": "ph.monitor",
    "npu": "ph.lightning",
    "hardware": "ph.hard-drives",
    "export": "ph.export",
    "import": "ph.file-arrow-up",
    "download": "ph.download-simple",
    "info": "ph.info",
    "folder": "ph.folder-open",
    "warning": "ph.warning-circle",
    "close": "ph.x",
    "image": "ph.image",
    "waiting": "ph.hourglass",
    "busy": "ph.dots-three",
    "done": "ph.check",
    "chat": "ph.chat-circle-text",
    "code": "ph.code",
    "menu": "ph.list",
    "light": "ph.sun",
    "dark": "ph.moon",
    "down": "ph.caret-down",
    "open-link": "ph.arrow-square-out",
    "delete": "ph.trash",
    "help": "ph.question",
    "server": "ph.broadcast",
    "key": "ph.key",
    "show": "ph.eye",
    "approve": "ph.hand-palm",
    "tool": "ph.wrench",
    "error": "ph.x-circle",
    "back": "ph.arrow-left",
    "forward": "ph.arrow-right",
    "up": "ph.arrow-up",
    "new-folder": "ph.folder-plus",
    "details-view": "ph.list-dashes",
    "list-view": "ph.squares-four",
    "attach": "ph.paperclip",
    "documents": "ph.books",
    "remember": "ph.push-pin",
    "temporary": "ph.ghost",
    "microphone": "ph.microphone",
    "voice-mode": "ph.chats-circle",  # a spoken conversation (Phosphor 1.3 has no waveform)
    "read-aloud": "ph.speaker-high",
    "stop-reading": "ph.stop-fill",  # filled: an outline square beside Copy read as a second copy icon
}

ROLE = QPalette.ColorRole

_themed: "weakref.WeakKeyDictionary[QAbstractButton | QAction, tuple[str, QPalette.ColorRole]]" = (
    weakref.WeakKeyDictionary())


def color_of(role: QPalette.ColorRole = ROLE.ButtonText) -> QColor:
    """The application palette's colour for role, now."""
    return QGuiApplication.palette().color(role)


def icon(name: str, role: QPalette.ColorRole = ROLE.ButtonText, color: QColor | str | None = None) -> QIcon:
    """The icon for a purpose in GLYPHS, in the palette's colour for role (or color).

    Disabled, it is drawn in the palette's disabled colour, so it dims as text does.
    """
    palette = QGuiApplication.palette()
    main = QColor(color) if color is not None else palette.color(role)
    disabled = palette.color(QPalette.ColorGroup.Disabled, role)
    return qtawesome.icon(GLYPHS[name], color=main, color_disabled=disabled,
                          color_active=main, color_selected=main)


def pixmap(name: str, size: int, color: QColor | str, ratio: float = 1.0) -> QPixmap:
    """The glyph for name as a pixmap of size × size logical pixels at device ratio."""
    return qtawesome.icon(GLYPHS[name], color=QColor(color)).pixmap(QSize(size, size), ratio)


def app_icon() -> QIcon:
    """Kestrel's icon at every size scripts/make_icons.py renders (Qt picks per use)."""
    kestrel = QIcon()
    for path in sorted(resource_path("icons").glob("kestrel-*.png")):
        kestrel.addFile(str(path))
    return kestrel


def themed(target: QAbstractButton | QAction, name: str, role: QPalette.ColorRole = ROLE.ButtonText) -> None:
    """Give target the icon for name now, and again in new colours after each refresh()."""
    _themed[target] = (name, role)
    target.setIcon(icon(name, role))


def is_themed(target: QAbstractButton | QAction) -> bool:
    """Whether target's icon was given by themed() (an app icon in the palette's colours)."""
    return target in _themed


def refresh() -> None:
    """Draw every themed() icon again in the palette's current colours (after a theme change)."""
    for target, (name, role) in list(_themed.items()):
        try:
            target.setIcon(icon(name, role))
        except RuntimeError:  # its C++ side was deleted with its window
            _themed.pop(target, None)

