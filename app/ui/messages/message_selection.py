"""A message's text made selectable: a read-only editor laid exactly over the painted text.

The list paints messages (thousands stay smooth that way); selecting part of one needs
Qt's own text selection, so clicking into a message's text, or Enter on it, opens this
editor over that text only, with a copy of the same document. Escape, or a click
elsewhere, closes it.
"""

from __future__ import annotations

from PySide6.QtCore import (QAbstractItemModel, QEvent, QMimeData, QModelIndex, QObject, QPersistentModelIndex, QRect,
                            Qt, QUrl, Signal)
from PySide6.QtGui import (QContextMenuEvent, QFocusEvent, QGuiApplication, QKeyEvent, QKeySequence, QTextCursor,
                           QTextDocument, QWheelEvent)
from PySide6.QtWidgets import (QApplication, QFrame, QListView, QMenu, QStyledItemDelegate, QStyleOptionViewItem,
                               QTextBrowser, QWidget)

from app.core.conversation import Message
from app.ui.messages.message_body import MessageBody
from app.ui.messages.message_copy import selection_markdown, selection_text
from app.ui.messages.message_layout import RowLayout

MARKDOWN_MIME = "text/markdown"

_Index = QModelIndex | QPersistentModelIndex


class SelectableText(QTextBrowser):
    """Holds its own copy of a message's laid-out document; copies as plain text or Markdown.

    Signals: closeRequested() (Escape, or the focus left for something other than a menu),
    linkActivated(str) (a link clicked: the view decides what opens).
    `message_text` is the message as written: what "Copy as Markdown" gives with nothing selected.
    """

    closeRequested = Signal()
    linkActivated = Signal(str)

    def __init__(self, document: QTextDocument, source: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.message_text = source
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
        if under is not None:
            QApplication.sendEvent(under, event)

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
        return SelectableText(document, message.text, parent)

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
