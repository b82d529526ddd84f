"""Fusion with the app's own icons where Qt would hand out its stock ones (dialog buttons, message boxes, close glyphs).

Qt's stock icons come from the platform's icon theme (a green tick and a red X on OK and
Cancel under GNOME or KDE) or from Qt's bundled pixmaps, drawn dark grey whatever the
palette (the clear button of a search field and a tab's close X all but vanish on the dark
theme). AppStyle answers those requests with Phosphor glyphs that are drawn in the
palette's colour when painted, so one that was handed out before a theme change follows it.
Whether dialog buttons carry icons at all is still the platform's call (none on Windows
and macOS).
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QIcon, QIconEngine, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import QProxyStyle, QStyle, QStyleFactory, QStyleOption, QWidget

from app.ui.common import icons

SP = QStyle.StandardPixmap
ROLE = QPalette.ColorRole
# Icons the app draws itself tell so by name: QIcon.name() is "kestrel:<purpose>".
NAME_PREFIX = "kestrel:"

# Qt's standard pixmap -> (purpose in icons.GLYPHS, the palette role it is drawn in).
STANDARD_ICONS: dict[QStyle.StandardPixmap, tuple[str, QPalette.ColorRole]] = {
    SP.SP_DialogOkButton: ("done", ROLE.ButtonText),
    SP.SP_DialogYesButton: ("done", ROLE.ButtonText),
    SP.SP_DialogSaveButton: ("done", ROLE.ButtonText),
    SP.SP_DialogApplyButton: ("done", ROLE.ButtonText),
    SP.SP_DialogYesToAllButton: ("done", ROLE.ButtonText),
    SP.SP_DialogSaveAllButton: ("done", ROLE.ButtonText),
    SP.SP_DialogOpenButton: ("folder", ROLE.ButtonText),
    SP.SP_DialogCancelButton: ("close", ROLE.ButtonText),
    SP.SP_DialogNoButton: ("close", ROLE.ButtonText),
    SP.SP_DialogNoToAllButton: ("close", ROLE.ButtonText),
    SP.SP_DialogCloseButton: ("close", ROLE.ButtonText),
    SP.SP_DialogAbortButton: ("close", ROLE.ButtonText),
    SP.SP_DialogDiscardButton: ("delete", ROLE.ButtonText),
    SP.SP_DialogResetButton: ("regenerate", ROLE.ButtonText),
    SP.SP_DialogRetryButton: ("regenerate", ROLE.ButtonText),
    SP.SP_DialogHelpButton: ("help", ROLE.ButtonText),
    SP.SP_MessageBoxQuestion: ("help", ROLE.Highlight),
    SP.SP_MessageBoxInformation: ("info", ROLE.Highlight),
    SP.SP_MessageBoxWarning: ("warning", ROLE.Highlight),
    SP.SP_MessageBoxCritical: ("error", ROLE.Highlight),
    SP.SP_LineEditClearButton: ("close", ROLE.PlaceholderText),
    SP.SP_TabCloseButton: ("close", ROLE.ButtonText),
    SP.SP_TitleBarCloseButton: ("close", ROLE.WindowText),
    SP.SP_DockWidgetCloseButton: ("close", ROLE.WindowText),
    SP.SP_ArrowBack: ("back", ROLE.ButtonText),
    SP.SP_ArrowForward: ("forward", ROLE.ButtonText),
    SP.SP_FileDialogBack: ("back", ROLE.ButtonText),
    SP.SP_FileDialogToParent: ("up", ROLE.ButtonText),
    SP.SP_FileDialogNewFolder: ("new-folder", ROLE.ButtonText),
    SP.SP_FileDialogDetailedView: ("details-view", ROLE.ButtonText),
    SP.SP_FileDialogListView: ("list-view", ROLE.ButtonText),
}


class PaletteIconEngine(QIconEngine):
    """A Phosphor glyph drawn in the application palette's colour for role at paint time."""

    def __init__(self, name: str, role: QPalette.ColorRole) -> None:
        super().__init__()
        self._name = name
        self._role = role

    def _icon(self) -> QIcon:
        return icons.icon(self._name, self._role)

    def paint(self, painter: QPainter, rect: QRect, mode: QIcon.Mode, state: QIcon.State) -> None:
        self._icon().paint(painter, rect, Qt.AlignmentFlag.AlignCenter, mode, state)

    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:
        return self._icon().pixmap(size, mode, state)

    def scaledPixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State, scale: float) -> QPixmap:
        return self._icon().pixmap(size, scale, mode, state)

    def clone(self) -> QIconEngine:
        return PaletteIconEngine(self._name, self._role)

    def iconName(self) -> str:
        return NAME_PREFIX + self._name


def palette_icon(name: str, role: QPalette.ColorRole = ROLE.ButtonText) -> QIcon:
    """The glyph for a purpose in icons.GLYPHS, always in the current palette's colour."""
    return QIcon(PaletteIconEngine(name, role))


class AppStyle(QProxyStyle):
    """Fusion, with STANDARD_ICONS drawn by the app. Only standardIcon is overridden: the
    other style calls (thousands a paint) stay in C++."""

    def standardIcon(self, standardIcon: QStyle.StandardPixmap, option: QStyleOption | None = None,
                     widget: QWidget | None = None) -> QIcon:  # Override QProxyStyle.standardIcon.
        own = STANDARD_ICONS.get(standardIcon)
        if own is not None:
            return palette_icon(*own)
        return super().standardIcon(standardIcon, option, widget)


def app_style() -> AppStyle:
    return AppStyle(QStyleFactory.create("Fusion"))
