"""Paints one message: who wrote it, its Markdown, its actions and stats, the context boundary."""

from __future__ import annotations

import math
from collections import OrderedDict

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, QPoint, QRect, QRectF, QSize, QTimer
from PySide6.QtGui import QFontMetrics, QPainter, QPalette, QTextDocument
from PySide6.QtWidgets import QStyle, QStyleOptionViewItem

from app.core.conversation import Message, MessageState, Role
from app.ui.messages import message_chrome as chrome
from app.ui.messages.code_blocks import shape_code
from app.ui.messages.markdown import markdown_to_html, plain_to_html
from app.ui.messages.message_actions import EVERY_ACTION, ActionIcons, action_at, action_rects, actions_for
from app.ui.messages.message_body import GrowingAnswer, MessageBody
from app.ui.messages.message_documents import MessageDocuments, link_citations
from app.ui.messages.message_chrome import stats_line
from app.ui.messages.message_memories import MEMORIES, paint_used, used_rect
from app.ui.messages.message_layout import Lines, RowLayout, chrome_height, column, row_layout, text_width
from app.ui.state.message_model import MessageListModel
from app.ui.messages.message_hits import RowHits
from app.ui.messages.message_selection import MessageList
from app.ui.messages.thinking_section import ThinkingSection
from app.ui.messages.tool_parts import parts_html

__all__ = ["MessageDelegate", "stats_line"]  # stats_line: the window's tests read it here

_Index = QModelIndex | QPersistentModelIndex

_CACHE = 300
# Heights of messages no longer shown are kept (for switching back) up to this many.
_HEIGHTS_KEPT = 20_000


class MessageDelegate(RowHits):
    """Keeps laid-out documents for the rows on screen, and the height of every row.

    A finished message is one document; an answer being written is one per Markdown
    block (GrowingAnswer), so each frame lays out only its last block. `layouts` counts
    the documents laid out. The view sets `hovered` ((message id, action) under the
    mouse), `copied` (the message just copied: its copy icon shows a tick) and
    `selecting` (the message whose text an editor shows: not painted under it). `offered`
    is which actions the list offers (the chat pane: all; the quick-ask window: copy); `memories_shown`
    whether an answer's "used N memories" is shown (where something opens them on memoriesChosen).
    `wrap_code` is how code blocks show long lines (set_wrap_code); `code_offsets` how far
    each wide one is scrolled sideways (message id → block number → pixels).
    """

    def __init__(self, view: MessageList) -> None:
        super().__init__(view)
        self._bodies: OrderedDict[int, tuple[tuple, MessageBody]] = OrderedDict()
        # Message id -> ((width, dark, wrap_code), its blocks) for the answers being written.
        self._growing: dict[int, tuple[tuple[int, bool, bool], GrowingAnswer]] = {}
        # message id -> (key, height, measured: laid out for real rather than estimated)
        self._heights: dict[int, tuple[tuple, int, bool]] = {}
        self._pending_hints: set[int] = set()
        # Row -> QSize for the current width: the answer to nearly every sizeHint call.
        self._sizes: dict[int, QSize] = {}
        self._viewport_width = 120
        self._column = column(120)[1]
        self._small = chrome.small_font(view.font())
        self._lines = self._measure_lines()
        self.documents = MessageDocuments(self._small)  # a message's attachments or sources, as chips
        self._icons = ActionIcons()
        self.dark = False
        self.wrap_code = True
        self.layouts = 0
        self.hovered: tuple[int, str] | None = None
        self.copied: int | None = None
        self.offered: frozenset[str] = EVERY_ACTION
        # An answer's "used N memories", shown where a click on it opens them (the chat pane's list).
        self.memories_shown = False
        self.thinking = ThinkingSection(self._document)
        # What the footer of an answer being written says: "writing…", or why it waits.
        self.streaming_note = "writing…"
        # The tool calls whose whole result the user asked to see ("Show all").
        self.expanded: set[str] = set()
        # Message id -> (key, document) of an answer's tool parts, kept while its later text streams.
        self._parts_docs: dict[int, tuple[tuple, QTextDocument]] = {}

    def clear(self) -> None:
        """The colours changed (the theme): lay the messages out again as they are painted.

        Their heights stay (colours do not move text; one found taller is measured again when
        painted), which spares re-estimating every row and laying the whole list out again.
        """
        self._bodies.clear()
        self._growing.clear()
        self._parts_docs.clear()
        self._icons.clear()
        self.thinking.clear()
        self._view.close_selection(keep_focus=True)  # its copy of the text has the old colours

    def set_wrap_code(self, wrap: bool) -> None:
        """Code blocks wrap their long lines, or keep them and scroll sideways: every row is laid out again."""
        if wrap == self.wrap_code:
            return
        self.wrap_code = wrap
        self._bodies.clear()
        self._growing.clear()
        self._parts_docs.clear()
        self._sizes.clear()
        self.code_offsets.clear()
        self._view.close_selection(keep_focus=True)  # its copy of the text is laid out the other way
        self._view.doItemsLayout()  # the heights are keyed with the choice: measured again as painted
        self._view.viewport().update()

    def forget_rows(self) -> None:
        """Another chat was opened: forget what is known by row, keep what is known by message
        (switching back finds its heights instead of estimating thousands again)."""
        self._sizes.clear()
        self._growing.clear()
        self.documents.forget()
        if len(self._heights) > _HEIGHTS_KEPT:
            self._heights.clear()

    def watch(self, model: QAbstractItemModel) -> None:
        """Drop cached row sizes when rows change; a changed row keeps the others' sizes."""
        model.dataChanged.connect(self._rows_changed)
        for signal in (model.rowsInserted, model.rowsRemoved, model.modelReset, model.layoutChanged):
            signal.connect(lambda *_: self._sizes.clear())

    def _rows_changed(self, top: QModelIndex, bottom: QModelIndex, *_roles: object) -> None:
        for row in range(top.row(), bottom.row() + 1):
            self._sizes.pop(row, None)

    def set_width(self, viewport_width: int) -> None:
        """The view was resized: every row's height may change."""
        self._viewport_width = viewport_width
        self._column = column(viewport_width)[1]
        self._small = chrome.small_font(self._view.font())
        self._lines = self._measure_lines()
        self.documents.set_font(self._small)
        self._sizes.clear()

    def _measure_lines(self) -> Lines:
        return Lines(self._view.fontMetrics().height(), QFontMetrics(self._small).height())

    # --- geometry -------------------------------------------------------------------
    #
    # sizeHint runs for every row whenever the list lays itself out (thousands of calls
    # for a long chat), so it reads the Message value straight from the model and
    # answers from a cache: no QVariant round trips, no Markdown.

    def _text_width(self, message: Message) -> int:
        return text_width(self._column, message.role == Role.USER)

    def message(self, index: _Index) -> Message:
        """The message on a row."""
        model = index.model()
        assert isinstance(model, MessageListModel)
        return model.message(index.row())

    def _key(self, message: Message, boundary: bool, width: int) -> tuple:
        text = message.text
        # Not the theme: a height holds in both (a body, laid out in colour, is keyed with it).
        return (hash(text), len(text), width, self.wrap_code, message.state, message.stats is not None, boundary,
                self.thinking.key(message), self._parts_key(message) if message.parts else (),
                len(message.attachments), len(message.sources))

    def _parts_key(self, message: Message) -> tuple:
        shown_whole = frozenset(self.expanded.intersection(getattr(p, "call_id", "") for p in message.parts))
        return (hash(message.parts), shown_whole)

    def _body(self, message: Message, key: tuple, width: int) -> MessageBody:
        cached = self._bodies.get(message.id)
        if cached is not None and cached[0] == (key, self.dark):
            self._bodies.move_to_end(message.id)
            return cached[1]
        if message.role == Role.ASSISTANT and message.parts:
            body = self._parts_body(message, width)
        elif message.role == Role.ASSISTANT and message.state == MessageState.STREAMING:
            body = self._growing_answer(message.id, width).layout(message.text)
        elif message.role == Role.ASSISTANT:
            self._growing.pop(message.id, None)
            rendered = link_citations(markdown_to_html(message.text, dark=self.dark), message.sources)
            body = MessageBody([self._document(rendered, width)])
        else:
            document = self._document(plain_to_html(message.text), width)
            # The bubble fits the words: as wide as the longest line (the same lines).
            fitted = math.ceil(document.idealWidth()) + 1
            if fitted < width:
                document.setTextWidth(fitted)
            body = MessageBody([document])
        self._bodies[message.id] = ((key, self.dark), body)
        if len(self._bodies) > _CACHE:
            self._bodies.popitem(last=False)
        return body

    def _parts_body(self, message: Message, width: int) -> MessageBody:
        """An answer that used tools: its parts (one document, laid out again only when they change)
        and, while it streams, the text written since its last part, block by block."""
        streaming = message.state == MessageState.STREAMING
        key = (self._parts_key(message), width, self.dark, self.wrap_code, streaming)
        known = self._parts_docs.get(message.id)
        if known is None or known[0] != key:
            html_text = parts_html(message.parts, dark=self.dark, expanded=self.expanded, streaming=streaming)
            known = self._parts_docs[message.id] = (key, self._document(html_text, width))
            if len(self._parts_docs) > _CACHE:
                self._parts_docs.pop(next(iter(self._parts_docs)))
        if not streaming:
            return MessageBody([known[1]])
        model = self._view.model()
        tail = message.text[model.tail_from(message.id):] if isinstance(model, MessageListModel) else ""
        later = self._growing_answer(message.id, width).layout(tail).documents if tail.strip() else []
        return MessageBody([known[1], *later])

    def toggle_call(self, call_id: str, show: bool) -> None:
        """Show a tool result whole, or cut again; the rows make room for it."""
        (self.expanded.add if show else self.expanded.discard)(call_id)
        self._sizes.clear()
        model = self._view.model()
        if model is not None and model.rowCount():
            for row in range(model.rowCount()):
                self.sizeHintChanged.emit(model.index(row, 0))

    def _growing_answer(self, message_id: int, width: int) -> GrowingAnswer:
        looks = (width, self.dark, self.wrap_code)
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
        shape_code(doc, self.wrap_code)
        doc.setTextWidth(width)
        self.layouts += 1
        return doc

    def _thinking_height(self, message: Message) -> int:
        return self.thinking.height(message, self._text_width(message), self._lines.line, self.dark)

    def _chrome_height(self, message: Message, boundary: bool) -> int:
        return chrome_height(self._lines, message.role == Role.USER, boundary, self._thinking_height(message),
                             self.documents.height(message, self._column))

    def _is_boundary(self, index: _Index) -> bool:
        model = index.model()
        return isinstance(model, MessageListModel) and model.starts_context(index.row())

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:  # Override.
        size = self._sizes.get(index.row())
        if size is None:
            size = self._sizes[index.row()] = self._size_of(index)
        return size

    def _size_of(self, index: _Index) -> QSize:
        message = self.message(index)
        width = self._text_width(message)
        boundary = self._is_boundary(index)
        key = self._key(message, boundary, width)
        known = self._heights.get(message.id)
        if known is not None and known[0] == key:
            return QSize(self._column, known[1])
        if known is not None and known[2]:
            # Measured before and changed since (a streaming answer): measure again.
            return QSize(self._column, self._measure(message, boundary, key, width))
        # Never painted: an estimate, kept until painting measures it exactly.
        estimate = self._estimate(message, boundary, width)
        self._heights[message.id] = (key, estimate, False)
        return QSize(self._column, estimate)

    def _measure(self, message: Message, boundary: bool, key: tuple, width: int) -> int:
        height = int(self._body(message, key, width).height) + self._chrome_height(message, boundary)
        self._heights[message.id] = (key, height, True)
        return height

    def _estimate(self, message: Message, boundary: bool, width: int) -> int:
        metrics = self._view.fontMetrics()
        per_line = max(1, width // max(1, metrics.averageCharWidth()))
        lines = sum(1 + len(line) // per_line for line in message.text.split("\n")) + 4 * len(message.parts)
        return lines * metrics.lineSpacing() + self._chrome_height(message, boundary)

    def body_of(self, index: _Index) -> MessageBody:
        """The row's text, laid out (from the cache when it is on screen)."""
        message = self.message(index)
        width = self._text_width(message)
        return self._body(message, self._key(message, self._is_boundary(index), width), width)

    def layout(self, index: _Index, rect: QRect | None = None) -> RowLayout:
        """Where the row's parts are, in viewport coordinates (at rect, else where the view has it)."""
        message, body = self.message(index), self.body_of(index)
        return row_layout(QRect(rect) if rect is not None else self._view.visualRect(index), self._viewport_width,
                          self._lines, user=message.role == Role.USER, boundary=self._is_boundary(index),
                          thinking=self._thinking_height(message), documents=self.documents.height(message, self._column),
                          text_size=(math.ceil(body.width), math.ceil(body.height)))

    def action_rects(self, index: _Index, rect: QRect | None = None) -> list[tuple[str, QRect]]:
        """The row's action icons and where they are (viewport coordinates)."""
        message = self.message(index)
        names = actions_for(message, self.is_last_answer(index), self.offered)
        return action_rects(self.layout(index, rect).actions, names, message.role == Role.USER)

    def action_at(self, index: _Index, point: QPoint) -> str | None:
        return action_at(self.action_rects(index), point) if index.isValid() else None

    def memories_at(self, index: _Index, point: QPoint) -> bool:
        """Whether a point (viewport coordinates) is on the row's "used N memories"."""
        if not index.isValid() or not self.message(index).memories or not self.memories_shown:
            return False
        rects = self.action_rects(index)
        used = self._used_rect(self.message(index), self.layout(index), rects)
        return used is not None and used.contains(point)

    def _used_rect(self, message: Message, layout: RowLayout, rects: list[tuple[str, QRect]]) -> QRect | None:
        """Where the row's "used N memories" sits, after its action icons (None where it is not shown)."""
        if not self.memories_shown:
            return None
        after = rects[-1][1].right() + 1 if rects else layout.actions.left()
        return used_rect(message, layout, after, QFontMetrics(self._small))

    def icon_ratios(self) -> set[float]:
        """The device pixel ratios the action icons were drawn at (2.0 on a 200% screen)."""
        return self._icons.ratios()

    def is_last_answer(self, index: _Index) -> bool:
        """Whether the row is the conversation's last message and an answer (regenerate offers)."""
        return index.row() == index.model().rowCount() - 1 and self.message(index).role == Role.ASSISTANT

    # --- painting -------------------------------------------------------------------

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:  # Override.
        message = self.message(index)
        width = self._text_width(message)
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
        layout = self.layout(index, rect)
        if layout.boundary is not None:
            chrome.paint_boundary(painter, layout.boundary, palette, self._small)
        if option.state & QStyle.StateFlag.State_Selected and self._view.hasFocus():
            chrome.paint_highlight(painter, layout, palette)
        if layout.bubble is not None:
            chrome.paint_bubble(painter, layout.bubble, palette)
        chrome.paint_author(painter, layout, message, palette, self._small)
        painter.setFont(self._view.font())
        exposed = QRectF(rect.intersected(self._view.exposed_rect()))
        self.thinking.paint(painter, message, layout.text.left(), layout.thinking_top, width, palette, exposed,
                            self.dark)
        if self.selecting != message.id:
            self._paint_body(painter, self._body(message, key, width), layout.text, exposed,
                             self.code_offsets.get(message.id, {}), palette)
        self.documents.paint(painter, message, layout.documents, palette)
        self._paint_actions(painter, index, message, layout, palette)
        painter.restore()

    def _paint_body(self, painter: QPainter, body: MessageBody, text: QRect, exposed: QRectF,
                    offsets: dict[int, float], palette: QPalette) -> None:
        # Only what is being painted: an answer may be many screens tall, and a frame of a
        # growing one repaints only its new part.
        left, top = text.left(), text.top()
        painter.translate(left, top)
        # The documents paint with the application palette, which the theme sets.
        body.draw(painter, exposed.translated(-left, -top), offsets, palette.color(QPalette.ColorRole.PlaceholderText))
        painter.translate(-left, -top)

    def _paint_actions(self, painter: QPainter, index: _Index, message: Message, layout: RowLayout,
                       palette: QPalette) -> None:
        names = actions_for(message, self.is_last_answer(index), self.offered)
        rects = action_rects(layout.actions, names, message.role == Role.USER)
        hovered = self.hovered[1] if self.hovered is not None and self.hovered[0] == message.id else None
        self._icons.paint(painter, rects, palette, hovered, self.copied == message.id)
        after = rects[-1][1].right() + 1 if rects else layout.actions.left()
        text = chrome.footer_text(message, self.streaming_note)
        used = self._used_rect(message, layout, rects)
        if used is not None:
            paint_used(painter, used, message, palette, self._small, self.hovered == (message.id, MEMORIES))
            after, text = used.right() + 1, "· " + text if text else ""
        chrome.paint_footer(painter, layout, after, text, palette, self._small)

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

    # --- hit tests ------------------------------------------------------------------

    def growth_rect(self, index: _Index, rect: QRect) -> QRect:
        """The part of a growing answer's row (at rect) that changed since this was last asked:
        from its first block laid out anew down to the footer."""
        message = self.message(index)
        growing, cached = self._growing.get(message.id), self._bodies.get(message.id)
        if growing is None or cached is None or message.parts or (message.thinking and not message.text):
            return QRect(rect)  # (the thinking above the answer is what grows)
        body, first = cached[1], growing[1].take_first_new()
        # Two pixels of slack: the author line's font may be a pixel taller.
        top = self._text_top(index) - 2 + int(body.tops[first] if first < len(body.tops) else body.height)
        return QRect(rect.left(), rect.top() + top, rect.width(), max(0, rect.height() - top))

    def _text_top(self, index: _Index) -> int:
        """Where the text starts in a row: under the context boundary, the author line and
        the thinking (and the bubble's padding)."""
        return self.layout(index, QRect(0, 0, self._viewport_width, 0)).text.top()

    def _thinking_top(self, index: _Index) -> int:
        layout = row_layout(QRect(0, 0, self._viewport_width, 0), self._viewport_width, self._lines,
                            user=False, boundary=self._is_boundary(index))
        return layout.thinking_top

    def thinking_header_at(self, index: QModelIndex, point: QPoint) -> bool:
        """Whether a point (viewport coordinates) is on the row's "Thinking" header line."""
        if not self.message(index).thinking:
            return False
        top = self._view.visualRect(index).top() + self._thinking_top(index)
        return top <= point.y() < top + self._lines.line + 2

    def toggle_thinking(self, index: QModelIndex) -> None:
        """Open or close the row's thinking; the list makes room for it."""
        self.thinking.toggle(self.message(index))
        self._sizes.pop(index.row(), None)
        self.sizeHintChanged.emit(index)
