"""The collapsible "Thinking" section above a reasoning model's answer."""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QPainter, QPalette, QTextDocument

from app.core.conversation import Message, MessageState
from app.ui.messages.message_body import GrowingAnswer, MessageBody

# The theme's placeholder colours: thinking reads as an aside, not as the answer.
_DIM = {True: "#9a9ea5", False: "#6b6f76"}


def thinking_html(text: str, dark: bool) -> str:
    """A model's thinking as written (no Markdown: it is a draft), dimmed and indented."""
    return f'<p style="white-space:pre-wrap;color:{_DIM[dark]};margin-left:14px">{html.escape(text)}</p>'


def _live(message: Message) -> bool:
    """The model is thinking now: its answer has not started."""
    return message.state == MessageState.STREAMING and not message.text


class ThinkingSection:
    """Lays out and paints the thinking of the messages that have some; knows which are open.

    A section is open while the model thinks and closes when the answer starts, unless
    the user opened or closed it with a click on its header line. Its header says
    "Thinking…" while it lasts and then how long it took.
    """

    def __init__(self, make_document: Callable[[str, int], QTextDocument]) -> None:
        self._make_document = make_document
        self._chosen: dict[int, bool] = {}  # message id -> open, as the user left it
        self._bodies: dict[int, tuple[tuple, MessageBody]] = {}
        self._growing: dict[int, tuple[tuple, GrowingAnswer]] = {}

    def clear(self) -> None:
        """The colours or the width changed: lay the thinking out again when painted."""
        self._bodies.clear()
        self._growing.clear()

    def is_open(self, message: Message) -> bool:
        return self._chosen.get(message.id, _live(message))

    def toggle(self, message: Message) -> None:
        self._chosen[message.id] = not self.is_open(message)

    def key(self, message: Message) -> tuple:
        """What the section's height depends on, for the delegate's caches."""
        return (len(message.thinking), self.is_open(message)) if message.thinking else ()

    def height(self, message: Message, width: int, line: int, dark: bool) -> int:
        if not message.thinking:
            return 0
        height = line + _GAP
        if self.is_open(message):
            height += int(self.body(message, width, dark).height) + _GAP
        return height

    def header(self, message: Message) -> str:
        arrow = "▾" if self.is_open(message) else "▸"
        if _live(message):
            return f"{arrow} Thinking…"
        seconds = (message.stats.thinking_ms if message.stats is not None else 0.0) / 1000
        if seconds >= 0.1:
            return f"{arrow} Thought for {seconds:.1f} s"
        return f"{arrow} Thought for a moment" if seconds else f"{arrow} Thought"

    def body(self, message: Message, width: int, dark: bool) -> MessageBody:
        key = (len(message.thinking), width, dark)
        cached = self._bodies.get(message.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        if message.state == MessageState.STREAMING:
            # Block by block, as a growing answer: a frame lays out only the last block.
            grower = self._growing.get(message.id)
            if grower is None or grower[0] != (width, dark):
                grower = self._growing[message.id] = ((width, dark), GrowingAnswer(
                    lambda text: self._make_document(thinking_html(text, dark), width)))
            body = grower[1].layout(message.thinking)
        else:
            self._growing.pop(message.id, None)
            body = MessageBody([self._make_document(thinking_html(message.thinking, dark), width)])
        self._bodies[message.id] = (key, body)
        if len(self._bodies) > _CACHE:
            self._bodies.pop(next(iter(self._bodies)))
        return body

    def paint(self, painter: QPainter, message: Message, left: int, top: int, width: int,
              palette: QPalette, visible: QRectF, dark: bool) -> int:
        """Paint the section at (left, top); returns where the answer starts."""
        if not message.thinking:
            return top
        line = painter.fontMetrics().height()
        painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
        painter.drawText(QRect(left, top, width, line), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         self.header(message))
        top += line + _GAP
        if self.is_open(message):
            body = self.body(message, width, dark)
            painter.translate(left, top)
            body.draw(painter, visible.translated(-left, -top))
            painter.translate(-left, -top)
            top += int(body.height) + _GAP
        return top


_GAP = 5
_CACHE = 50
