"""Under an answer that was given the person's memories: "used 3 memories", first in its footer, opened on click."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPalette

from app.core.conversation import Message, MessageState, Role
from app.ui.messages.message_layout import ACTION, PAD, RowLayout

MEMORIES = "memories"  # the message delegate's `hovered` name for it (it is not an icon)
USED_TIP = "Click to see the memories this answer was given"


def used_words(message: Message) -> str:
    """"used 3 memories" under a written answer that was given some; "" otherwise."""
    count = len(message.memories)
    if message.role != Role.ASSISTANT or message.state == MessageState.STREAMING or not count:
        return ""
    return "used 1 memory" if count == 1 else f"used {count:,} memories"


def used_rect(message: Message, layout: RowLayout, after: int, metrics: QFontMetrics) -> QRect | None:
    """Where "used N memories" sits: just after the action icons (which end at x = after), before the
    stats, so the stats are what is elided when the column is narrow. None when the answer used none."""
    words = used_words(message)
    if not words:
        return None
    row = layout.actions
    left = after + PAD // 2 if after > row.left() else row.left()
    width = min(metrics.horizontalAdvance(words) + 1, max(0, row.right() + 1 - left))
    return QRect(left, row.top(), width, ACTION)


def paint_used(painter: QPainter, rect: QRect, message: Message, palette: QPalette, font: QFont,
               hovered: bool) -> None:
    """The words in the link colour, underlined under the mouse, as a link reads."""
    shown = QFont(font)
    shown.setUnderline(hovered)
    painter.setFont(shown)
    painter.setPen(palette.color(QPalette.ColorRole.Link))
    words = painter.fontMetrics().elidedText(used_words(message), Qt.TextElideMode.ElideRight, rect.width())
    painter.drawText(rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, words)
