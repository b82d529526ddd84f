"""A message's text made selectable: a read-only editor laid exactly over the painted text.

The list paints messages (thousands stay smooth that way); selecting part of one needs
Qt's own text selection, so clicking into a message's text, or Enter on it, opens this
editor over that text only, with a copy of the same document. Escape, or a click
elsewhere, closes it.
"""

from __future__ import annotations

from PySide6.QtCore import (QAbstractItemModel, QEvent, QMimeData, QModelIndex, QObject, QPersistentModelIndex,
                            QPointF, QRect, QRectF, Qt, QUrl, Signal)
from PySide6.QtGui import (QAbstractTextDocumentLayout, QContextMenuEvent, QFocusEvent, QGuiApplication, QKeyEvent,
                           QKeySequence, QMouseEvent, QPainter, QPaintEvent, QPalette, QTextCharFormat, QTextCursor,
                           QTextDocument, QWheelEvent)
from PySide6.QtWidgets import (QApplication, QFrame, QListView, QMenu, QStyledItemDelegate, QStyleOptionViewItem,
                               QTextBrowser, QWidget)

from app.core.conversation import Message
from app.ui.messages.code_blocks import clamp, draw_document, draw_wrap_marks
from app.ui.messages.message_body import MessageBody, code_layout
from app.ui.messages.message_copy import selection_markdown, selection_text
from app.ui.messages.message_layout import RowLayout

MARKDOWN_MIME = "text/markdown"

_Index = QModelIndex | QPersistentModelIndex


class SelectableText(QTextBrowser):
    """Holds its own copy of a message's laid-out document; copies as plain text or Markdown.

    Signals: closeRequested() (Escape, or the focus left for something other than a menu),
    linkActivated(str) (a link clicked: the view decides what opens).
    `message_text` is the message as written: what "Copy as Markdown" gives with nothing selected.
    `code_offsets` (code block number → pixels) is how far its wide code blocks are scrolled
    sideways, shared with the list: it paints them so, maps the mouse through them, and
    scrolls one to keep the text cursor in sight.
    """

    closeRequested = Signal()
    linkActivated = Signal(str)

    def __init__(self, document: QTextDocument, source: str, parent: QWidget | None = None,
                 code_offsets: dict[int, float] | None = None) -> None:
        super().__init__(parent)
        self.message_text = source
        self.code_offsets = code_offsets if code_offsets is not None else {}
        self._mouse_down = False  # a click or drag places the cursor where it shows: nothing to follow
        self._code_drag = False  # a press in a wide code block's lines: this selects, not Qt
        self.setObjectName("messageText")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setOpenLinks(False)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction
                                     | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        # See-through: the row painted under it (the bubble) is its background.
        self.viewport().setAutoFillBackground(False)
        self.setStyleSheet("QTextBrowser#messageText{background:transparent}")
        self.setAccessibleName("Message text")
        document.setParent(self)
        self.setDocument(document)
        self.anchorClicked.connect(lambda url: self.linkActivated.emit(url.toString()))
        self.cursorPositionChanged.connect(self._follow_cursor)

    def selected(self) -> bool:
        return self.textCursor().hasSelection()

    def copy_text(self) -> None:
        """The selection as plain text (the whole text when nothing is selected)."""
        QGuiApplication.clipboard().setMimeData(self.createMimeDataFromSelection())

    def copy_markdown(self) -> None:
        """The selection as Markdown (the message's own Markdown when nothing is selected)."""
        cursor = self.textCursor()
        text = selection_markdown(cursor) if cursor.hasSelection() else self.message_text
        QGuiApplication.clipboard().setText(text)

    def createMimeDataFromSelection(self) -> QMimeData:  # Override QTextEdit.
        cursor = self.textCursor()
        if not cursor.hasSelection():
            cursor.select(QTextCursor.SelectionType.Document)
        mime = QMimeData()
        mime.setText(selection_text(cursor))
        mime.setData(MARKDOWN_MIME, selection_markdown(cursor).encode())
        return mime

    def context_menu(self) -> QMenu:
        """Copy (the selection as text), Copy as Markdown, Select all."""
        menu = QMenu(self)
        copy = menu.addAction("Copy", self.copy_text)
        copy.setShortcut(QKeySequence.StandardKey.Copy)
        copy.setEnabled(self.selected())
        menu.addAction("Copy as Markdown", self.copy_markdown)
        menu.addSeparator()
        select = menu.addAction("Select all", self.selectAll)
        select.setShortcut(QKeySequence.StandardKey.SelectAll)
        return menu

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:  # Override: our copies.
        menu = self.context_menu()
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        menu.popup(event.globalPos())

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Override: Escape closes.
        if event.key() == Qt.Key.Key_Escape:
            self.closeRequested.emit()
            return
        if event.matches(QKeySequence.StandardKey.Copy):
            self.copy_text()
            return
        super().keyPressEvent(event)

    def focusOutEvent(self, event: QFocusEvent) -> None:  # Override: leaving it closes it.
        super().focusOutEvent(event)
        # Not for its own menu, nor for another window coming forward: the selection waits.
        if event.reason() not in (Qt.FocusReason.PopupFocusReason, Qt.FocusReason.ActiveWindowFocusReason):
            self.closeRequested.emit()

    def wheelEvent(self, event: QWheelEvent) -> None:  # Override: the list under it scrolls, not this.
        under = self.parentWidget()
        if under is not None:  # at the same place under it: a sideways turn over a code block scrolls that
            place = QPointF(self.mapTo(under, event.position().toPoint()))
            QApplication.sendEvent(under, QWheelEvent(place, event.globalPosition(), event.pixelDelta(),
                                                      event.angleDelta(), event.buttons(), event.modifiers(),
                                                      event.phase(), event.inverted()))

    # --- wide code blocks, scrolled as the list shows them ---------------------------

    def paintEvent(self, event: QPaintEvent) -> None:  # Override QTextEdit: code blocks as the list paints them.
        code = code_layout(self.document())
        ink = self.palette().color(QPalette.ColorRole.PlaceholderText)
        shift_x, shift_y = self.horizontalScrollBar().value(), self.verticalScrollBar().value()
        visible = QRectF(event.rect()).translated(shift_x, shift_y)
        if not any(strip.overflow > 0 for strip in code.strips):
            super().paintEvent(event)
        else:
            painter = QPainter(self.viewport())
            painter.translate(-shift_x, -shift_y)
            draw_document(painter, self.document(), visible, code.strips, self.code_offsets, self._context(), ink)
            painter.end()
        if code.marks:
            painter = QPainter(self.viewport())
            painter.translate(-shift_x, -shift_y)
            draw_wrap_marks(painter, code.marks, visible, ink)
            painter.end()

    def _context(self) -> QAbstractTextDocumentLayout.PaintContext:
        """What QTextEdit paints with: its palette, the cursor while it has the focus, the selection."""
        context = QAbstractTextDocumentLayout.PaintContext()
        context.palette = self.palette()
        cursor = self.textCursor()
        if self.hasFocus():
            context.cursorPosition = cursor.position()
        if cursor.hasSelection():
            chosen = QAbstractTextDocumentLayout.Selection()
            chosen.cursor = cursor
            look = QTextCharFormat()
            look.setBackground(self.palette().brush(QPalette.ColorRole.Highlight))
            look.setForeground(self.palette().brush(QPalette.ColorRole.HighlightedText))
            chosen.format = look
            context.selections = [chosen]
        return context

    def _code_position(self, point: QPointF) -> int | None:
        """The text position under a point in a wide code block's lines, as they show scrolled
        (Qt's own hit test stops at the block's edge, where a kept line runs on); None elsewhere."""
        layout = self.document().documentLayout()
        for number, strip in enumerate(code_layout(self.document()).strips):
            if strip.overflow <= 0 or not strip.window.top() <= point.y() <= strip.window.bottom() \
                    or point.x() < strip.row.left():
                continue
            inside = layout.hitTest(QPointF(strip.window.left() + 1, point.y()), Qt.HitTestAccuracy.FuzzyHit)
            block = self.document().findBlock(max(0, inside))
            place = layout.blockBoundingRect(block)
            lines = block.layout()
            line = lines.lineAt(0) if lines.lineCount() == 1 else lines.lineForTextPosition(0)
            x = point.x() + clamp(strip, self.code_offsets.get(number, 0.0)) - place.left()
            return block.position() + line.xToCursor(x)
        return None

    def _select_to(self, position: int, keep_anchor: bool) -> None:
        cursor = self.textCursor()
        cursor.setPosition(position, QTextCursor.MoveMode.KeepAnchor if keep_anchor else QTextCursor.MoveMode.MoveAnchor)
        self.setTextCursor(cursor)
        self.viewport().update()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # Override: a wide code block's lines as they show.
        self._mouse_down = True
        position = self._code_position(event.position())
        if position is None or event.button() != Qt.MouseButton.LeftButton:
            self._code_drag = False
            super().mousePressEvent(event)
            return
        self._code_drag = True
        self.setFocus(Qt.FocusReason.MouseFocusReason)
        self._select_to(position, bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # Override: a wide code block's lines as they show.
        position = self._code_position(event.position())
        if event.buttons() & Qt.MouseButton.LeftButton and (self._code_drag or position is not None):
            if position is None:
                position = self.cursorForPosition(event.position().toPoint()).position()
            self._select_to(position, True)
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # Override: a wide code block's lines as they show.
        if not self._code_drag:
            super().mouseReleaseEvent(event)
        self._code_drag = False
        self._mouse_down = False

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:  # Override: a word in a wide code block.
        position = self._code_position(event.position())
        if position is None:
            super().mouseDoubleClickEvent(event)
            return
        cursor = self.textCursor()
        cursor.setPosition(position)
        cursor.select(QTextCursor.SelectionType.WordUnderCursor)
        self.setTextCursor(cursor)

    def _follow_cursor(self) -> None:
        """Scroll the wide code block the text cursor is in so that the cursor shows (the keys moved it)."""
        if self._mouse_down:
            return
        place = self.cursorRect()
        x, y = place.center().x() + self.horizontalScrollBar().value(), place.center().y()
        for number, strip in enumerate(code_layout(self.document()).strips):
            if strip.overflow <= 0 or not strip.window.top() <= y <= strip.window.bottom():
                continue
            offset = clamp(strip, self.code_offsets.get(number, 0.0))
            margin = 24.0  # clear of the fade
            if x - offset > strip.window.right() - margin:
                offset = clamp(strip, x - strip.window.right() + margin)
            elif x - offset < strip.window.left() + margin:
                offset = clamp(strip, x - strip.window.left() - margin)
            if offset != self.code_offsets.get(number, 0.0):
                self.code_offsets[number] = offset
                self.viewport().update()
            return

    def loadResource(self, kind: int, name: QUrl | str) -> None:  # Override QTextBrowser: answers load nothing.
        return None


class MessageList(QListView):
    """The message list as its delegate and its pointer see it; MessageView is the one.

    MessageDelegate and MessagePointer cannot import MessageView (it imports them), so they
    know it by this base: it names what they call on it beyond QListView's own methods,
    and MessageView gives each one.
    """

    def exposed_rect(self) -> QRect:
        """The part of the viewport being painted now."""
        raise NotImplementedError

    def open_selection(self, index: QModelIndex | None = None) -> SelectableText | None:
        """Open a message's text for selecting; None while it is being written."""
        raise NotImplementedError

    def close_selection(self, keep_focus: bool = False) -> None:
        """Close the selection editor; the list takes the keys back unless keep_focus."""
        raise NotImplementedError

    def code_moved(self, index: QModelIndex) -> None:
        """A code block of the row was scrolled sideways: paint it (and the editor over it) again."""
        raise NotImplementedError

    def run_action(self, index: QModelIndex, action: str) -> None:
        """Do what a message's icon does."""
        raise NotImplementedError


class SelectionEditing(QStyledItemDelegate):
    """A delegate whose rows' text opens in a SelectableText (MessageDelegate is one).

    Subclasses give message(), body_of() and layout(); `selecting` is the message whose
    text an editor shows now, which the delegate does not paint under it.
    """

    def __init__(self, view: MessageList) -> None:
        super().__init__(view)
        self._view = view
        self.selecting: int | None = None
        # Message id -> its wide code blocks' sideways offsets (block number -> pixels).
        self.code_offsets: dict[int, dict[int, float]] = {}

    def message(self, index: _Index) -> Message:
        raise NotImplementedError

    def body_of(self, index: _Index) -> MessageBody:
        raise NotImplementedError

    def layout(self, index: _Index, rect: QRect | None = None) -> RowLayout:
        raise NotImplementedError

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem,
                     index: _Index) -> QWidget:  # Override QStyledItemDelegate.
        message = self.message(index)
        document = self.body_of(index).documents[0].clone()
        document.setDocumentMargin(0)
        document.setDefaultFont(self._view.font())
        self.selecting = message.id
        return SelectableText(document, message.text, parent, self.code_offsets.setdefault(message.id, {}))

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index: _Index) -> None:  # Override.
        editor.setGeometry(self.layout(index, option.rect).text)

    def setEditorData(self, editor: QWidget, index: _Index) -> None:  # Override: it holds its own document.
        pass

    def setModelData(self, editor: QWidget, model: QAbstractItemModel, index: _Index) -> None:  # Override: read-only.
        pass

    def destroyEditor(self, editor: QWidget, index: _Index) -> None:  # Override.
        self.selecting = None
        super().destroyEditor(editor, index)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Override: the editor handles its keys and focus.
        if isinstance(watched, SelectableText):
            return False
        return super().eventFilter(watched, event)
