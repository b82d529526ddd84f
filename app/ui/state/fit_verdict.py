"""A fit verdict as the user sees it: its words, its coloured dot and the numbers behind it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap

from app.hardware.fit import FitEstimate, Verdict

# The words and colour of each verdict; tests/ui/test_model_items.py checks that every Verdict has both.
VERDICT_WORDS: dict[Verdict, str] = {Verdict.RUNS_WELL: "Runs well", Verdict.RUNS_SLOWLY: "Runs slowly",
                                     Verdict.WONT_FIT: "Will not fit"}
VERDICT_COLOURS: dict[Verdict, str] = {Verdict.RUNS_WELL: "#2e9d4a", Verdict.RUNS_SLOWLY: "#d08a00",
                                       Verdict.WONT_FIT: "#d13b30"}
UNKNOWN_FIT_WORDS = "Not known yet"
_icons: dict[Verdict, QIcon] = {}


def verdict_of(fit: FitEstimate | None) -> Verdict | None:
    """A fit estimate's verdict; None for no estimate."""
    return None if fit is None else fit.verdict


def verdict_words(fit: FitEstimate | None) -> str:
    """The verdict as the user reads it: "Runs well", or "Not known yet" for no estimate."""
    return UNKNOWN_FIT_WORDS if fit is None else VERDICT_WORDS[fit.verdict]


def verdict_tooltip(fit: FitEstimate | None) -> str:
    """The numbers behind a verdict, for hovering over it."""
    if fit is None:
        return ("Not known yet: Kestrel has not read this machine's memory yet, or the model's size "
                "is only known once its download starts.")
    lines = [fit.summary, *fit.lines]
    if fit.max_context and not any(line.startswith("Longest context") for line in fit.lines):
        lines.append(f"Longest context that fits: {fit.max_context:,} tokens")
    return "\n".join(lines)


def verdict_icon(verdict: Verdict) -> QIcon:
    """A coloured dot beside the verdict's words (the words alone say it too)."""
    if verdict not in _icons:
        pixmap = QPixmap(12, 12)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setBrush(QColor(VERDICT_COLOURS[verdict]))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.drawEllipse(1, 1, 10, 10)
        painter.end()
        _icons[verdict] = QIcon(pixmap)
    return _icons[verdict]
