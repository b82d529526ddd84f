"""What a message row paints around its text: the context line, the bubble, the author, the stats."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPalette

from app.core.answer_stats import AnswerStats, FinishReason
from app.core.conversation import Message, MessageState, Role
from app.ui.state.message_words import author_of
from app.ui.messages.message_layout import ACTION, BUBBLE_RADIUS, PAD, RowLayout

_LEFT = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
BOUNDARY_TEXT = "The model no longer sees the messages above: they are outside its context"


def stats_line(stats: AnswerStats | None) -> str:
    """'TTFT 120 ms · 35.2 tok/s · 64 tokens · CPU' for an answer's footer; where a server the person
    added wrote it, where first: 'on studio-pc · 84 tok/s · TTFT 120 ms · 64 tokens' ("" if the engine
    reported nothing: it failed, see AnswerStats.error)."""
    if stats is None or not stats.reported:
        return ""
    if stats.server:
        parts = [f"on {stats.server}", f"{stats.tokens_per_s:.0f} tok/s", f"TTFT {stats.ttft_ms:.0f} ms",
                 f"{stats.tokens} tokens"]
    else:
        parts = [f"TTFT {stats.ttft_ms:.0f} ms", f"{stats.tokens_per_s:.1f} tok/s", f"{stats.tokens} tokens",
                 stats.device]
    if stats.finish_reason == FinishReason.CANCELLED:
        parts.append("stopped")
    elif stats.finish_reason in (FinishReason.LENGTH, FinishReason.CONTEXT):
        parts.append("cut at the token limit")
    if stats.template_note:
        # The whole reason is in the answer's tooltip; the footer says that it happened.
        parts.append("built-in chat format (the model's own failed)")
    return " · ".join(p for p in parts if p)


def footer_text(message: Message, streaming_note: str) -> str:
    """What the actions row says after the icons: the stats, "writing…", or that it was cut off."""
    text = stats_line(message.stats)
    if message.state == MessageState.STREAMING:
        return streaming_note
    if message.state == MessageState.INTERRUPTED:
        return "Interrupted: " + (text or "the answer was cut off")
    return text


def small_font(font: QFont) -> QFont:
    """The author label's and the stats' font: a step smaller than the messages'."""
    small = QFont(font)
    if font.pointSizeF() > 0:
        small.setPointSizeF(font.pointSizeF() * 0.88)
    else:
        small.setPixelSize(max(9, round(font.pixelSize() * 0.88)))
    return small


def muted(palette: QPalette) -> QColor:
    return palette.color(QPalette.ColorRole.PlaceholderText)


def paint_boundary(painter: QPainter, band: QRect, palette: QPalette, font: QFont) -> None:
    """The context boundary: its words in the middle of a rule across the column."""
    painter.setFont(font)
    painter.setPen(muted(palette))
    metrics = painter.fontMetrics()
    words = metrics.elidedText(BOUNDARY_TEXT, Qt.TextElideMode.ElideRight, band.width() - 4 * PAD)
    painter.drawText(band, Qt.AlignmentFlag.AlignCenter, words)
    half = (metrics.horizontalAdvance(words) + 2 * PAD) // 2
    y = band.center().y() + 1
    rule = QColor(muted(palette))
    rule.setAlpha(110)
    painter.setPen(rule)
    painter.drawLine(band.left(), y, band.center().x() - half, y)
    painter.drawLine(band.center().x() + half, y, band.right(), y)


def paint_highlight(painter: QPainter, layout: RowLayout, palette: QPalette) -> None:
    """The current message, while the list has the keyboard: a soft band behind it."""
    color = QColor(palette.color(QPalette.ColorRole.Highlight))
    color.setAlpha(30)
    area = QRect(layout.column.left() - PAD, layout.author.top() - PAD // 2,
                 layout.column.width() + 2 * PAD, layout.actions.bottom() - layout.author.top() + PAD)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(color)
    painter.drawRoundedRect(area, 10, 10)


def paint_bubble(painter: QPainter, bubble: QRect, palette: QPalette) -> None:
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(palette.color(QPalette.ColorRole.AlternateBase))
    painter.drawRoundedRect(bubble, BUBBLE_RADIUS, BUBBLE_RADIUS)


def paint_author(painter: QPainter, layout: RowLayout, message: Message, palette: QPalette, font: QFont) -> None:
    painter.setFont(font)
    painter.setPen(muted(palette))
    user = message.role == Role.USER
    painter.drawText(layout.author, _RIGHT if user else _LEFT, author_of(message))


def paint_footer(painter: QPainter, layout: RowLayout, after: int, text: str, palette: QPalette,
                 font: QFont) -> None:
    """The stats (or note) after the icons (which end at x = after), elided to the column's room."""
    if not text:
        return
    painter.setFont(font)
    painter.setPen(muted(palette))
    left = max(layout.actions.left(), after + PAD // 2) if after > layout.actions.left() else layout.actions.left()
    room = QRect(left, layout.actions.top(), layout.actions.right() - left, ACTION)
    painter.drawText(room, _LEFT, painter.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, room.width()))
