"""A fit verdict as the user sees it: its words, its coloured dot and the numbers behind it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap

from app.hardware.fit import FitEstimate, Verdict

# The words and colour of each verdict; tests/ui/test_model_items.py checks that every Verdict has both.
VERDICT_WORDS: dict[Verdict, str] = {Verdict.RUNS_WELL: "Runs well", Verdict.USABLE: "Usable",
                                     Verdict.RUNS_SLOWLY: "Runs slowly", Verdict.WONT_FIT: "Will not fit"}
# A speed verdict's slow is said plainly ("Slow"); without a speed prediction it is the memory's "Runs slowly".
SLOW_WORD = "Slow"
VERDICT_COLOURS: dict[Verdict, str] = {Verdict.RUNS_WELL: "#2e9d4a", Verdict.USABLE: "#8a9d2e",
                                       Verdict.RUNS_SLOWLY: "#d08a00", Verdict.WONT_FIT: "#d13b30"}
# Best first: the order the catalog sorts its fit column in.
VERDICT_ORDER: dict[Verdict, int] = {Verdict.RUNS_WELL: 0, Verdict.USABLE: 1, Verdict.RUNS_SLOWLY: 2,
                                     Verdict.WONT_FIT: 3}
UNKNOWN_FIT_WORDS = "Not known yet"
# An embedding model answers no chat: it gets this label instead of a chat-speed verdict.
EMBEDDING_WORDS = "Embedding"
EMBEDDING_REASON = ("An embedding model: it turns text into vectors for document search and answers no chat, "
                    "so it has no chat speed.")
_icons: dict[Verdict, QIcon] = {}


def verdict_of(fit: FitEstimate | None) -> Verdict | None:
    """A fit estimate's verdict; None for no estimate."""
    return None if fit is None else fit.verdict


def verdict_words(fit: FitEstimate | None) -> str:
    """The verdict as the user reads it, with the predicted speed where there is one: "Runs well ·
    about 25 tokens/s here", "Slow · about 2 tokens/s here (estimated)"; "Not known yet" for no estimate."""
    if fit is None:
        return UNKNOWN_FIT_WORDS
    if fit.speed is None:
        return VERDICT_WORDS[fit.verdict]
    word = SLOW_WORD if fit.verdict == Verdict.RUNS_SLOWLY else VERDICT_WORDS[fit.verdict]
    return word if fit.verdict == Verdict.WONT_FIT else f"{word} · {fit.speed.words}"


def verdict_rank(fit: FitEstimate | None) -> tuple[int, float]:
    """A sort key, best first: the verdict, then the faster model; unknown last."""
    if fit is None:
        return len(VERDICT_ORDER), 0.0
    return VERDICT_ORDER[fit.verdict], -(fit.speed.tokens_per_s if fit.speed is not None else 0.0)


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
