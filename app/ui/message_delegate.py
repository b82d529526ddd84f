"""Paints one message: who wrote it, its Markdown, its stats, the context boundary."""

from __future__ import annotations

import html
from collections import OrderedDict

from PySide6.QtCore import QEvent, QModelIndex, QPersistentModelIndex, QPointF, QRect, QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QPainter, QPalette, QTextDocument
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem, QToolTip

from app.ui.markdown import markdown_to_html, plain_to_html
from app.ui.message_body import GrowingAnswer, MessageBody
from app.core.conversation import Message, MessageState, Role
from app.ui.message_model import MessageListModel
from app.ui.thinking_section import ThinkingSection

_Index = QModelIndex | QPersistentModelIndex

PAD = 10
_CACHE = 300
# Heights of messages no longer shown are kept (for switching back) up to this many.
_HEIGHTS_KEPT = 20_000


def stats_line(stats: dict | None) -> str:
    """'TTFT 120 ms · 35.2 tok/s · 64 tokens · CPU' for an answer's footer."""
    if not stats or "tokens" not in stats:
        return ""
    parts = [f"TTFT {stats.get('ttft_ms', 0):.0f} ms", f"{stats.get('tokens_per_s', 0):.1f} tok/s",
             f"{stats['tokens']} tokens", str(stats.get("device", ""))]
    reason = stats.get("finish_reason")
    if reason == "cancelled":
        parts.append("stopped")
    elif reason in ("length", "context"):
        parts.append("cut at the token limit")
    if stats.get("template_note"):
        # The whole reason is in the answer's tooltip; the footer says that it happened.
        parts.append("built-in chat format (the model's own failed)")
    return " · ".join(p for p in parts if p)


class MessageDelegate(QStyledItemDelegate):
    """Keeps laid-out documents for the rows on screen, and the height of every row.

    A finished message is one document; an answer being written is one per Markdown
    block (GrowingAnswer), so each frame lays out only its last block. `layouts` counts
    the documents laid out.
    """

    def __init__(self, view) -> None:
        super().__init__(view)
        self._view = view
        self._bodies: OrderedDict[int, tuple[tuple, MessageBody]] = OrderedDict()
        # Message id -> ((width, dark), its blocks) for the answers being written.
        self._growing: dict[int, tuple[tuple[int, bool], GrowingAnswer]] = {}
        # message id -> (key, height, measured: laid out for real rather than estimated)
        self._heights: dict[int, tuple[tuple, int, bool]] = {}
        self._pending_hints: set[int] = set()
        # Row -> QSize for the current width: the answer to nearly every sizeHint call.
        self._sizes: dict[int, QSize] = {}
        self._width = 120
        self.dark = False
        self.layouts = 0
        self.thinking = ThinkingSection(self._document)
        # What the footer of an answer being written says: "writing…", or why it waits.
        self.streaming_note = "writing…"

    def clear(self) -> None:
        """The colours changed (the theme): lay the messages out again as they are painted.

        Their heights stay: colours do not move text, and a message found taller when it
        is painted is measured again then. Keeping them spares re-estimating every row
        and laying the whole list out again on a theme change.
        """
        self._bodies.clear()
        self._growing.clear()
        self.thinking.clear()

    def forget_rows(self) -> None:
        """Another chat was opened: forget what is known by row, keep what is known by message.

        Switching back to a chat then finds its messages' heights, instead of estimating
        thousands of them again.
        """
        self._sizes.clear()
        self._growing.clear()
        if len(self._heights) > _HEIGHTS_KEPT:
            self._heights.clear()

    def watch(self, model) -> None:
        """Drop cached row sizes when rows change; a changed row keeps the others' sizes."""
        model.dataChanged.connect(self._rows_changed)
        for signal in (model.rowsInserted, model.rowsRemoved, model.modelReset, model.layoutChanged):
            signal.connect(lambda *_: self._sizes.clear())

    def _rows_changed(self, top: QModelIndex, bottom: QModelIndex, *_roles) -> None:
        for row in range(top.row(), bottom.row() + 1):
            self._sizes.pop(row, None)

    def set_width(self, viewport_width: int) -> None:
        """The view was resized: every row's height may change."""
        self._width = max(120, viewport_width - 4 * PAD)
        self._sizes.clear()

    # --- geometry -------------------------------------------------------------------
    #
    # sizeHint runs for every row whenever the list lays itself out (thousands of calls
    # for a long chat), so it reads the Message value straight from the model and
    # answers from a cache: no QVariant round trips, no Markdown.

    def _text_width(self) -> int:
        return self._width

    def _message(self, index: _Index) -> Message:
        model = index.model()
        assert isinstance(model, MessageListModel)
        return model.message(index.row())

    def _key(self, message: Message, boundary: bool, width: int) -> tuple:
        text = message.text
        # Not the theme: a height holds in both (a body, laid out in colour, is keyed with it).
        return (hash(text), len(text), width, message.state, message.stats is not None, boundary,
                self.thinking.key(message))

    def _body(self, message: Message, key: tuple, width: int) -> MessageBody:
        cached = self._bodies.get(message.id)
        if cached is not None and cached[0] == (key, self.dark):
            self._bodies.move_to_end(message.id)
            return cached[1]
        if message.role == Role.ASSISTANT and message.state == MessageState.STREAMING:
            body = self._growing_answer(message.id, width).layout(message.text)
        else:
            self._growing.pop(message.id, None)
            html = (markdown_to_html(message.text, dark=self.dark) if message.role == Role.ASSISTANT
                    else plain_to_html(message.text))
            body = MessageBody([self._document(html, width)])
        self._bodies[message.id] = ((key, self.dark), body)
        if len(self._bodies) > _CACHE:
            self._bodies.popitem(last=False)
        return body

    def _growing_answer(self, message_id: int, width: int) -> GrowingAnswer:
        looks = (width, self.dark)
        known = self._growing.get(message_id)
        if known is None or known[0] != looks:
            dark = self.dark
            known = self._growing[message_id] = (looks, GrowingAnswer(
                lambda text: self._document(markdown_to_html(text, dark=dark), width)))
        return known[1]

    def _document(self, html: str, width: int) -> QTextDocument:
        doc = QTextDocument()
        doc.setDefaultFont(self._view.font())
        doc.setDocumentMargin(0)
        doc.setHtml(html)
        doc.setTextWidth(width)
        self.layouts += 1
        return doc

    def _chrome_height(self, message: Message, boundary: bool, width: int) -> int:
        line = self._view.fontMetrics().height()
        height = 3 * PAD + line  # the author line and the padding
        height += self.thinking.height(message, width, line, self.dark)
        if stats_line(message.stats) or message.state != MessageState.COMPLETE:
            height += line + PAD // 2
        if boundary:
            height += line + PAD
        return height

    def _is_boundary(self, index: _Index) -> bool:
        model = index.model()
        return isinstance(model, MessageListModel) and model.starts_context(index.row())

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:  # Override.
        size = self._sizes.get(index.row())
        if size is None:
            size = self._sizes[index.row()] = self._size_of(index)
        return size

    def _size_of(self, index: _Index) -> QSize:
        width = self._text_width()
        message = self._message(index)
        boundary = self._is_boundary(index)
        key = self._key(message, boundary, width)
        known = self._heights.get(message.id)
        if known is not None and known[0] == key:
            return QSize(width, known[1])
        if known is not None and known[2]:
            # Measured before and changed since (a streaming answer): measure again.
            return QSize(width, self._measure(message, boundary, key, width))
        # Never painted: an estimate, kept until painting measures it exactly.
        estimate = self._estimate(message, boundary, width)
        self._heights[message.id] = (key, estimate, False)
        return QSize(width, estimate)

    def _measure(self, message: Message, boundary: bool, key: tuple, width: int) -> int:
        height = int(self._body(message, key, width).height) + self._chrome_height(message, boundary, width)
        self._heights[message.id] = (key, height, True)
        return height

    def _estimate(self, message: Message, boundary: bool, width: int) -> int:
        metrics = self._view.fontMetrics()
        per_line = max(1, width // max(1, metrics.averageCharWidth()))
        lines = sum(1 + len(line) // per_line for line in message.text.split("\n"))
        return lines * metrics.lineSpacing() + self._chrome_height(message, boundary, width)

    # --- painting -------------------------------------------------------------------

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:  # Override.
        width = self._text_width()
        message = self._message(index)
        boundary = self._is_boundary(index)
        key = self._key(message, boundary, width)
        known = self._heights.get(message.id)
        cached = self._bodies.get(message.id)
        if known is None or known[0] != key or not known[2] or cached is None or cached[0] != (key, self.dark):
            measured = self._measure(message, boundary, key, width)
            if measured != option.rect.height():
                self._sizes.pop(index.row(), None)
                self._hint_changed_later(index)
        painter.save()
        # Copies, not views into `option`: holding option.palette across other calls
        # corrupts reference counts in PySide6 6.12 (a crash seen in paint).
        rect = QRect(option.rect)
        palette = QPalette(self._view.palette())
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        top = rect.top() + PAD
        if boundary:
            top = self._paint_boundary(painter, rect, top, palette)
        self._paint_bubble(painter, palette, selected, index, QRect(rect.left() + PAD, top - PAD // 2,
                                                                   rect.width() - 2 * PAD, rect.bottom() - top))
        top = self._paint_author(painter, rect, top, message, palette)
        left = rect.left() + 2 * PAD
        top = self.thinking.paint(painter, message, left, top, width, palette,
                                  QRectF(rect.intersected(self._view.exposed_rect())), self.dark)
        body = self._body(message, key, width)
        # Only what is being painted: an answer may be many screens tall, and a frame of a
        # growing one repaints only its new part.
        visible = QRectF(rect.intersected(self._view.exposed_rect())).translated(-left, -top)
        painter.translate(left, top)
        # drawContents paints with the application palette, which the theme sets.
        body.draw(painter, visible)
        painter.translate(-left, -top)
        self._paint_footer(painter, rect, top + int(body.height) + PAD // 2, message, palette)
        painter.restore()

    def _paint_bubble(self, painter, palette: QPalette, selected: bool, index, bubble: QRect) -> None:
        user = self._message(index).role == Role.USER
        color = palette.color(QPalette.ColorRole.AlternateBase if user else QPalette.ColorRole.Base)
        if selected:
            color = palette.color(QPalette.ColorRole.Highlight)
            color.setAlpha(60)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(color)
        painter.drawRoundedRect(bubble, 8, 8)

    def _paint_author(self, painter, rect, top, message: Message, palette) -> int:
        font = painter.font()
        font.setBold(True)
        painter.setFont(font)
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        who = "You" if message.role == Role.USER else "Kestrel"
        line = painter.fontMetrics().height()
        painter.drawText(QRect(rect.left() + 2 * PAD, top, rect.width() - 4 * PAD, line),
                         Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, who)
        font.setBold(False)
        painter.setFont(font)
        return top + line + PAD // 2

    def _paint_footer(self, painter, rect, top, message: Message, palette) -> None:
        text = stats_line(message.stats)
        if message.state == MessageState.STREAMING:
            text = self.streaming_note
        elif message.state == MessageState.INTERRUPTED:
            text = "Interrupted: " + (text or "the answer was cut off")
        if not text:
            return
        painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
        line = painter.fontMetrics().height()
        painter.drawText(QRect(rect.left() + 2 * PAD, top, rect.width() - 4 * PAD, line),
                         Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)

    def _paint_boundary(self, painter, rect, top, palette) -> int:
        line = painter.fontMetrics().height()
        color = QColor(palette.color(QPalette.ColorRole.PlaceholderText))
        painter.setPen(color)
        middle = top + line // 2
        label = "The model no longer sees the messages above: they are outside its context"
        painter.drawText(QRect(rect.left() + PAD, top, rect.width() - 2 * PAD, line),
                         Qt.AlignmentFlag.AlignCenter, label)
        painter.drawLine(rect.left() + PAD, middle + line // 2 + 2, rect.right() - PAD, middle + line // 2 + 2)
        return top + line + PAD

    def _hint_changed_later(self, index: _Index) -> None:
        # Telling the view inside paint() would relayout mid-paint; do it right after.
        row = index.row()
        if row in self._pending_hints:
            return
        self._pending_hints.add(row)
        model = index.model()

        def emit() -> None:
            self._pending_hints.discard(row)
            if row < model.rowCount():
                self.sizeHintChanged.emit(model.index(row, 0))

        QTimer.singleShot(0, emit)

    def helpEvent(self, event, view, option, index) -> bool:  # Override.
        """An answer's tooltip says in full why the model's own chat template was not used."""
        if event.type() == QEvent.Type.ToolTip and index.isValid():
            note = (self._message(index).stats or {}).get("template_note")
            if note:
                # Rich text, so that Qt wraps a long reason instead of one screen-wide line.
                QToolTip.showText(event.globalPos(), f"<qt>{html.escape(note)}</qt>", view)
                return True
        return super().helpEvent(event, view, option, index)

    def anchor_at(self, index: QModelIndex, point) -> str:
        """The link under a point in a message, if any."""
        width = self._text_width()
        message = self._message(index)
        body = self._body(message, self._key(message, self._is_boundary(index), width), width)
        rect = self._view.visualRect(index)
        top = rect.top() + self._text_top(index)
        return body.anchor_at(QPointF(point.x() - rect.left() - 2 * PAD, point.y() - top))

    def growth_rect(self, index: _Index, rect: QRect) -> QRect:
        """The part of a growing answer's row (at rect) that changed since this was last asked:
        from its first block laid out anew down to the footer."""
        message = self._message(index)
        growing, cached = self._growing.get(message.id), self._bodies.get(message.id)
        if growing is None or cached is None or (message.thinking and not message.text):
            return QRect(rect)  # (the thinking above the answer is what grows)
        body, first = cached[1], growing[1].take_first_new()
        # Two pixels of slack: the author line's bold font may be a pixel taller.
        top = self._text_top(index) - 2 + int(body.tops[first] if first < len(body.tops) else body.height)
        return QRect(rect.left(), rect.top() + top, rect.width(), max(0, rect.height() - top))

    def _text_top(self, index: _Index) -> int:
        """Where the text starts in a row: under the context boundary, the author line and
        the thinking."""
        return self._thinking_top(index) + self.thinking.height(self._message(index), self._text_width(),
                                                                 self._view.fontMetrics().height(), self.dark)

    def _thinking_top(self, index: _Index) -> int:
        line = self._view.fontMetrics().height()
        return PAD + line + PAD // 2 + (line + PAD if self._is_boundary(index) else 0)

    def thinking_header_at(self, index: QModelIndex, point) -> bool:
        """Whether a point (viewport coordinates) is on the row's "Thinking" header line."""
        if not self._message(index).thinking:
            return False
        rect = self._view.visualRect(index)
        top = rect.top() + self._thinking_top(index)
        return top <= point.y() < top + self._view.fontMetrics().height() + 2

    def toggle_thinking(self, index: QModelIndex) -> None:
        """Open or close the row's thinking; the list makes room for it."""
        self.thinking.toggle(self._message(index))
        self._sizes.pop(index.row(), None)
        self.sizeHintChanged.emit(index)
