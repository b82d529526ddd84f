"""Light and dark palettes; "system" follows the platform's colour scheme as it changes.

The colours were chosen for contrast, not taken from a style: every text colour meets
WCAG AA (4.5:1) on the backgrounds it is drawn on, and muted text (dates, stats,
placeholders) still does. tests/ui/test_theme.py checks the pairs with `contrast()`.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from app.ui.common import icons
from app.ui.common.app_style import AppStyle, app_style

R = QPalette.ColorRole

_DARK = {
    R.Window: "#18191c", R.WindowText: "#e8e9ec",
    R.Base: "#1f2024", R.AlternateBase: "#2b2f38",
    R.Text: "#e8e9ec", R.Button: "#2a2c31", R.ButtonText: "#e8e9ec",
    R.Highlight: "#2f62d9", R.HighlightedText: "#ffffff",
    R.ToolTipBase: "#2f3238", R.ToolTipText: "#f2f3f5",
    R.PlaceholderText: "#a1a6ae", R.Link: "#8ab4ff", R.LinkVisited: "#b39dff",
    R.Mid: "#3a3d44", R.Midlight: "#33363c", R.Dark: "#111214", R.Shadow: "#000000",
    R.Light: "#3f434a", R.BrightText: "#ffffff",
}
_LIGHT = {
    R.Window: "#f6f7f9", R.WindowText: "#1d2025",
    R.Base: "#ffffff", R.AlternateBase: "#eaf0fb",
    R.Text: "#1d2025", R.Button: "#ffffff", R.ButtonText: "#1d2025",
    R.Highlight: "#2a5fd0", R.HighlightedText: "#ffffff",
    R.ToolTipBase: "#2b2e33", R.ToolTipText: "#f6f7f9",
    R.PlaceholderText: "#646a73", R.Link: "#1a56c4", R.LinkVisited: "#6a3fc0",
    R.Mid: "#d5d8de", R.Midlight: "#e6e8ec", R.Dark: "#b9bdc5", R.Shadow: "#8a8f98",
    R.Light: "#ffffff", R.BrightText: "#000000",
}

# Disabled controls' words: clearly dimmer than enabled ones, yet at least 3:1 against
# the window, buttons and fields (WCAG's figure for inactive parts is none; 3:1 keeps a
# greyed label readable). Without these every colour group shares the enabled colours,
# and a disabled button looks like one that works.
_DARK_DISABLED = "#80858e"
_LIGHT_DISABLED = "#868b93"
_DIMMED = (R.ButtonText, R.WindowText, R.Text)

# Text drawn on each background, as (text role, background role): what contrast() checks.
TEXT_PAIRS = ((R.WindowText, R.Window), (R.Text, R.Base), (R.Text, R.AlternateBase),
              (R.ButtonText, R.Button), (R.HighlightedText, R.Highlight), (R.ToolTipText, R.ToolTipBase),
              (R.PlaceholderText, R.Base), (R.PlaceholderText, R.Window), (R.PlaceholderText, R.AlternateBase),
              (R.Link, R.Base), (R.Link, R.AlternateBase))


def palette_colors(dark: bool) -> dict[QPalette.ColorRole, str]:
    """The colours of one theme, by role."""
    return dict(_DARK if dark else _LIGHT)


def disabled_text(dark: bool) -> str:
    return _DARK_DISABLED if dark else _LIGHT_DISABLED


def contrast(first: str, second: str) -> float:
    """WCAG 2 contrast ratio between two colours (1 to 21)."""
    def luminance(name: str) -> float:
        color = QColor(name)
        channels = []
        for value in (color.redF(), color.greenF(), color.blueF()):
            channels.append(value / 12.92 if value <= 0.03928 else ((value + 0.055) / 1.055) ** 2.4)
        red, green, blue = channels
        return 0.2126 * red + 0.7152 * green + 0.0722 * blue

    light, dark = sorted((luminance(first), luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def system_is_dark() -> bool:
    hints = QGuiApplication.styleHints()
    return hints.colorScheme() == Qt.ColorScheme.Dark


def build_palette(dark: bool) -> QPalette:
    palette = QPalette()
    for role, color in palette_colors(dark).items():
        palette.setColor(role, QColor(color))
    if hasattr(R, "Accent"):  # Qt 6.6+: what some styles draw focus and checks with
        palette.setColor(R.Accent, QColor(palette_colors(dark)[R.Highlight]))
    for role in _DIMMED:
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor(disabled_text(dark)))
    return palette


def apply_theme(app: QApplication, choice: str) -> bool:
    """Apply "light", "dark" or "system"; returns whether the result is dark."""
    dark = system_is_dark() if choice == "system" else choice == "dark"
    if not isinstance(app.style(), AppStyle):
        # Setting a style re-polishes every widget (tens of ms in a full window): once.
        app.setStyle(app_style())
    palette = build_palette(dark)
    app.setPalette(palette)
    # Fusion draws a check box's and a radio button's frame in the window colour darkened
    # by 40%: on the dark palette all but black on a dark field, on the light one 1.8:1
    # against white. Their own Window colour (which they never fill) is set so that the
    # frame stands at least 3:1 against the field (WCAG's figure for a control's edge).
    indicators = QPalette(palette)
    indicators.setColor(QPalette.ColorRole.Window, QColor(_INDICATOR_WINDOW[dark]))
    for kind in ("QCheckBox", "QRadioButton", "ServerChecklist"):  # the last: a list of check boxes
        app.setPalette(indicators, kind)  # type: ignore[arg-type]  # the stub says bytes; PySide takes str
    icons.refresh()
    return dark


# Darkened by Fusion for the frame to #6e7279 (3.3:1 against the dark Base, #1f2024) and
# #7b8088 (drawn blended to about #8a8f97 on a check box: 3.3:1 against white).
_INDICATOR_WINDOW = {True: "#9aa0aa", False: "#acb3be"}


# The banner's colours: white on a red that gives it 5.9:1 (light) and 7.3:1 (dark).
_BANNER = {False: "#b3261e", True: "#8c1d18"}


def part_styles(dark: bool) -> dict[str, str]:
    """Style sheets for the window's few styled parts, by object name, in concrete colours.

    Each goes on its own widget, not on the window: a style sheet on the window would
    put every widget in it (the message list included) under the slower style-sheet
    style, and setting it again on a theme change would re-polish them all (a 60-110 ms
    stall, measured by benchmarks/ui_watchdog.py). Set again on every theme change: a
    style sheet's colours are fixed when it is applied.
    """
    c = {role.name: value for role, value in palette_colors(dark).items()}
    return {
        "composerFrame": f"""
            QFrame#composerFrame {{ background: {c['Base']}; border: 1px solid {c['Mid']}; border-radius: 14px; }}
            QPlainTextEdit#composer {{ background: transparent; border: none; }}
            QToolButton#send {{ background: {c['Highlight']}; border: none; border-radius: 17px; }}
            QToolButton#send:disabled {{ background: {c['Mid']}; }}""",
        "composerNote": f"QLabel#composerNote {{ color: {c['PlaceholderText']}; padding: 2px 6px; }}",
        "bannerRow": f"""
            QWidget#bannerRow {{ background: {_BANNER[dark]}; border-radius: 8px; }}
            QLabel#banner {{ color: #ffffff; padding: 8px 10px; }}
            QToolButton#bannerClose {{ border: none; padding: 6px; }}""",
        "toolApproval": f"""QFrame#toolApproval {{ background: {c['AlternateBase']}; border: 1px solid {c['Highlight']};
                                                   border-radius: 10px; }}
            QLabel#toolApprovalTitle {{ font-weight: bold; }}""",
        "firstRunOffer": f"""QFrame#firstRunOffer {{ background: {c['AlternateBase']}; border: 1px solid {c['Mid']};
                                                    border-radius: 12px; padding: 10px; }}""",
        "emptyText": f"QLabel#emptyText {{ color: {c['PlaceholderText']}; font-size: 11pt; }}",
        "mainSplitter": f"QSplitter::handle {{ background: {c['Mid']}; }}",
        "statusLine": f"QLabel#statusDot {{ color: {c['PlaceholderText']}; }}",
    }
