"""Paints one message: who wrote it, its Markdown, its stats, the context boundary."""

from __future__ import annotations

from collections import OrderedDict

from PySide6.QtCore import QModelIndex, QPointF, QRect, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QPainter, QPalette, QTextDocument
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from app.ui.markdown import markdown_to_html, plain_to_html
from app.ui.message_model import MessageRoles

PAD = 10
_CACHE = 300


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
    return " · ".join(p for p in parts if p)


class MessageDelegate(QStyledItemDelegate):
    """Keeps laid-out documents for the rows on screen, and the height of every row."""

    def __init__(self, view) -> None:
        super().__init__(view)
        self._view = view
        self._docs: OrderedDict[int, tuple[tuple, QTextDocument]] = OrderedDict()
        self._heights: dict[int, tuple[tuple, int]] = {}
        self._pending_hints: set[int] = set()
        self.dark = False
        self.layouts = 0

    def clear(self) -> None:
        self._docs.clear()
        self._heights.clear()

    # --- geometry -------------------------------------------------------------------

    def _text_width(self) -> int:
        return max(120, self._view.viewport().width() - 4 * PAD)

    def _key(self, index: QModelIndex, width: int) -> tuple:
        text = index.data(Qt.ItemDataRole.DisplayRole) or ""
        return (hash(text), len(text), width, self.dark, index.data(MessageRoles.STATE),
                bool(index.data(MessageRoles.STATS)), index.data(MessageRoles.OUT_OF_CONTEXT))

    def _document(self, index: QModelIndex, key: tuple, width: int) -> QTextDocument:
        message_id = index.data(MessageRoles.MESSAGE_ID)
        cached = self._docs.get(message_id)
        if cached is not None and cached[0] == key:
            self._docs.move_to_end(message_id)
            return cached[1]
        text = index.data(Qt.ItemDataRole.DisplayRole) or ""
        doc = QTextDocument()
        doc.setDefaultFont(self._view.font())
        doc.setDocumentMargin(0)
        if index.data(MessageRoles.ROLE) == "assistant":
            doc.setHtml(markdown_to_html(text, dark=self.dark))
        else:
            doc.setHtml(plain_to_html(text))
        doc.setTextWidth(width)
        self.layouts += 1
        self._docs[message_id] = (key, doc)
        if len(self._docs) > _CACHE:
            self._docs.popitem(last=False)
        return doc

    def _chrome_height(self, index: QModelIndex) -> int:
        line = self._view.fontMetrics().height()
        height = 3 * PAD + line  # the author line and the padding
        if stats_line(index.data(MessageRoles.STATS)) or index.data(MessageRoles.STATE) != "complete":
            height += line + PAD // 2
        if self._is_boundary(index):
            height += line + PAD
        return height

    def _is_boundary(self, index: QModelIndex) -> bool:
        model = index.model()
        return index.row() > 0 and index.row() == getattr(model, "context_starts_at", 0)

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex) -> QSize:  # Override.
        width = self._text_width()
        key = self._key(index, width)
        message_id = index.data(MessageRoles.MESSAGE_ID)
        known = self._heights.get(message_id)
        if known is not None and known[0] == key:
            return QSize(width, known[1])
        if known is None:
            # A row never painted gets an estimate (opening a 2,000-message chat must
            # not lay out 2,000 documents); painting it measures it exactly.
            return QSize(width, self._estimate(index, width))
        return QSize(width, self._measure(index, key, width))

    def _measure(self, index: QModelIndex, key: tuple, width: int) -> int:
        height = int(self._document(index, key, width).size().height()) + self._chrome_height(index)
        self._heights[index.data(MessageRoles.MESSAGE_ID)] = (key, height)
        return height

    def _estimate(self, index: QModelIndex, width: int) -> int:
        text = index.data(Qt.ItemDataRole.DisplayRole) or ""
        metrics = self._view.fontMetrics()
        per_line = max(1, width // max(1, metrics.averageCharWidth()))
        lines = sum(1 + len(line) // per_line for line in text.split("\n"))
        return lines * metrics.lineSpacing() + self._chrome_height(index)

    # --- painting -------------------------------------------------------------------

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:  # Override.
        width = self._text_width()
        key = self._key(index, width)
        message_id = index.data(MessageRoles.MESSAGE_ID)
        known = self._heights.get(message_id)
        if known is None or known[0] != key:
            measured = self._measure(index, key, width)
            if measured != option.rect.height():
                self._hint_changed_later(index)
        painter.save()
        # Copies, not views into `option`: holding option.palette across other calls
        # corrupts reference counts in PySide6 6.12 (a crash seen in paint).
        rect = QRect(option.rect)
        palette = QPalette(self._view.palette())
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        top = rect.top() + PAD
        if self._is_boundary(index):
            top = self._paint_boundary(painter, rect, top, palette)
        self._paint_bubble(painter, palette, selected, index, QRect(rect.left() + PAD, top - PAD // 2,
                                                                   rect.width() - 2 * PAD, rect.bottom() - top))
        top = self._paint_author(painter, rect, top, index, palette)
        doc = self._document(index, key, width)
        painter.translate(rect.left() + 2 * PAD, top)
        # drawContents paints with the application palette, which the theme sets.
        doc.drawContents(painter)
        painter.translate(-(rect.left() + 2 * PAD), -top)
        self._paint_footer(painter, rect, top + int(doc.size().height()) + PAD // 2, index, palette)
        painter.restore()

    def _paint_bubble(self, painter, palette: QPalette, selected: bool, index, bubble: QRect) -> None:
        user = index.data(MessageRoles.ROLE) == "user"
        color = palette.color(QPalette.ColorRole.AlternateBase if user else QPalette.ColorRole.Base)
        if selected:
            color = palette.color(QPalette.ColorRole.Highlight)
            color.setAlpha(60)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(color)
        painter.drawRoundedRect(bubble, 8, 8)

    def _paint_author(self, painter, rect, top, index, palette) -> int:
        font = painter.font()
        font.setBold(True)
        painter.setFont(font)
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        who = "You" if index.data(MessageRoles.ROLE) == "user" else "Kestrel"
        line = painter.fontMetrics().height()
        painter.drawText(QRect(rect.left() + 2 * PAD, top, rect.width() - 4 * PAD, line),
                         Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, who)
        font.setBold(False)
        painter.setFont(font)
        return top + line + PAD // 2

    def _paint_footer(self, painter, rect, top, index, palette) -> None:
        state = index.data(MessageRoles.STATE)
        text = stats_line(index.data(MessageRoles.STATS))
        if state == "streaming":
            text = "writing…"
        elif state == "interrupted":
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

    def _hint_changed_later(self, index: QModelIndex) -> None:
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

    def anchor_at(self, index: QModelIndex, point) -> str:
        """The link under a point in a message, if any."""
        width = self._text_width()
        doc = self._document(index, self._key(index, width), width)
        rect = self._view.visualRect(index)
        top = rect.top() + PAD + self._view.fontMetrics().height() + PAD // 2
        if self._is_boundary(index):
            top += self._view.fontMetrics().height() + PAD
        return doc.documentLayout().anchorAt(QPointF(point.x() - rect.left() - 2 * PAD, point.y() - top))
