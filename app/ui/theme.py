"""Light and dark palettes; "system" follows the platform's colour scheme as it changes."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory

_DARK = {
    QPalette.ColorRole.Window: "#1f2124", QPalette.ColorRole.WindowText: "#e6e6e6",
    QPalette.ColorRole.Base: "#26292d", QPalette.ColorRole.AlternateBase: "#2f3a4a",
    QPalette.ColorRole.Text: "#e6e6e6", QPalette.ColorRole.Button: "#2d3035",
    QPalette.ColorRole.ButtonText: "#e6e6e6", QPalette.ColorRole.Highlight: "#3d7bd9",
    QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.ToolTipBase: "#2d3035",
    QPalette.ColorRole.ToolTipText: "#e6e6e6", QPalette.ColorRole.PlaceholderText: "#9a9ea5",
    QPalette.ColorRole.Link: "#7fb0ff", QPalette.ColorRole.Mid: "#3a3d42",
}
_LIGHT = {
    QPalette.ColorRole.Window: "#f3f3f3", QPalette.ColorRole.WindowText: "#1b1b1b",
    QPalette.ColorRole.Base: "#ffffff", QPalette.ColorRole.AlternateBase: "#e7effa",
    QPalette.ColorRole.Text: "#1b1b1b", QPalette.ColorRole.Button: "#ececec",
    QPalette.ColorRole.ButtonText: "#1b1b1b", QPalette.ColorRole.Highlight: "#2f6fd0",
    QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.ToolTipBase: "#ffffdc",
    QPalette.ColorRole.ToolTipText: "#1b1b1b", QPalette.ColorRole.PlaceholderText: "#6b6f76",
    QPalette.ColorRole.Link: "#1a5fb4", QPalette.ColorRole.Mid: "#d0d0d0",
}

# Disabled controls' words: clearly dimmer than enabled ones, yet at least 3.3:1 against
# the window, buttons and fields so a greyed label stays readable. Without these every
# colour group shares the enabled colours, and a disabled button looks like one that works.
_DARK_DISABLED = "#8a8f97"
_LIGHT_DISABLED = "#7c8087"
_DIMMED = (QPalette.ColorRole.ButtonText, QPalette.ColorRole.WindowText, QPalette.ColorRole.Text)


def system_is_dark() -> bool:
    hints = QGuiApplication.styleHints()
    return hints.colorScheme() == Qt.ColorScheme.Dark


def apply_theme(app: QApplication, choice: str) -> bool:
    """Apply "light", "dark" or "system"; returns whether the result is dark."""
    dark = system_is_dark() if choice == "system" else choice == "dark"
    if app.style().name().lower() != "fusion":
        # Setting a style re-polishes every widget (tens of ms in a full window): once.
        app.setStyle(QStyleFactory.create("Fusion"))
    palette = QPalette()
    for role, color in (_DARK if dark else _LIGHT).items():
        palette.setColor(role, QColor(color))
    for role in _DIMMED:
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor(_DARK_DISABLED if dark else _LIGHT_DISABLED))
    app.setPalette(palette)
    return dark
