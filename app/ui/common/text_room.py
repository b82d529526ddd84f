"""The room a window's title and a table's cells need: what the forms fit to, and what the clip probe checks."""

from __future__ import annotations

from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QAbstractItemView, QApplication, QWidget

# A title bar's own parts beside the title, in logical pixels: on Windows the icon and the
# minimize, maximize and close buttons (46 px each) with their padding, the widest of the
# desktops Kestrel runs on. A window narrower than its title plus these shows "Name th…".
TITLE_BAR_RESERVE = 180
# A view's property: the columns that elide their text on purpose and show it whole in the
# tooltip (a path that keeps its file name). The clip probe checks every other column.
ELIDED_COLUMNS = "elidedColumns"
# A widget's property: the whole text of a widget that elides it by hand. The clip probe
# checks that it is elided only when its window has no room left for the rest.
FULL_TEXT = "fullText"


def title_width_needed(window: QWidget) -> int:
    """How wide window must be for its title bar to show its whole title (bold, as title bars draw it)."""
    font = QApplication.font()
    font.setBold(True)
    return QFontMetrics(font).horizontalAdvance(window.windowTitle()) + TITLE_BAR_RESERVE


def fit_title(window: QWidget) -> None:
    """Make window at least as wide as its whole title needs."""
    window.setMinimumWidth(max(window.minimumWidth(), title_width_needed(window)))


def elides_on_purpose(view: QAbstractItemView, *columns: int) -> None:
    """Say that these columns of view elide on purpose (their tooltip shows the whole text)."""
    view.setProperty(ELIDED_COLUMNS, list(columns))
