"""MessageView: the conversation as a list, with copy / regenerate / edit on each message."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QModelIndex, Qt, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices, QGuiApplication, QKeySequence, QPainter, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QListView, QMenu, QToolButton,
                               QWidget)

from app.ui.message_delegate import MessageDelegate
from app.ui.message_model import MessageRoles


class MessageActions(QWidget):
    """The small tool bar over the current message."""

    def __init__(self, view: "MessageView") -> None:
        super().__init__(view.viewport())
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.copy = self._button("Copy", "Copy this message", view.copy_current)
        self.regenerate = self._button("Regenerate", "Write the last answer again", view.regenerateRequested.emit)
        self.edit = self._button("Edit", "Edit this message and send it again", view.edit_current)
        for button in (self.copy, self.regenerate, self.edit):
            layout.addWidget(button)
        self.hide()

    def _button(self, text: str, tip: str, slot) -> QToolButton:
        button = QToolButton(self)
        button.setText(text)
        button.setToolTip(tip)
        button.setAutoRaise(True)
        button.clicked.connect(slot)
        return button


class MessageView(QListView):
    """Stays at the bottom while an answer streams, unless the user scrolled up."""

    regenerateRequested = Signal()
    editRequested = Signal(int, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("messages")
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setWordWrap(True)
        self.setMouseTracking(True)
        self.setAccessibleName("Messages")
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._context_menu)
        self.delegate = MessageDelegate(self)
        self.setItemDelegate(self.delegate)
        self.delegate.set_width(self.viewport().width())
        self.actions_bar = MessageActions(self)
        self._follow = True
        self.verticalScrollBar().valueChanged.connect(self._scrolled)
        self.verticalScrollBar().rangeChanged.connect(self._range_changed)
        self.entered.connect(self._show_actions)
        self._add_shortcuts()

    def setModel(self, model) -> None:  # Override QListView.setModel.
        super().setModel(model)
        self.delegate.watch(model)
        model.modelReset.connect(self._reset)
        model.rowsInserted.connect(self._rows_inserted)
        self.selectionModel().currentChanged.connect(lambda current, _: self._show_actions(current))

    def _rows_inserted(self) -> None:
        if self._follow:
            self.scrollToBottom()

    def _reset(self) -> None:
        self.delegate.clear()
        self.actions_bar.hide()
        self._follow = True
        self.scrollToBottom()

    # --- following the end ------------------------------------------------------------

    def scroll_to_end(self) -> None:
        """Jump to the newest message and keep following it."""
        self._follow = True
        self.scrollToBottom()

    def _scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._follow = value >= bar.maximum() - 4
        self._place_actions()

    def _range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(maximum)

    def resizeEvent(self, event) -> None:  # Override QListView.resizeEvent.
        self.delegate.set_width(self.viewport().width())
        super().resizeEvent(event)
        self._place_actions()

    # --- actions --------------------------------------------------------------------

    def _show_actions(self, index: QModelIndex) -> None:
        if not index.isValid():
            self.actions_bar.hide()
            return
        self._actions_index = index
        role = index.data(MessageRoles.ROLE)
        self.actions_bar.regenerate.setVisible(bool(index.data(MessageRoles.IS_LAST_ANSWER)))
        self.actions_bar.edit.setVisible(role == "user")
        self.actions_bar.adjustSize()
        self.actions_bar.show()
        self._place_actions()

    def _place_actions(self) -> None:
        index = getattr(self, "_actions_index", None)
        if index is None or not index.isValid():
            return
        rect = self.visualRect(index)
        bar = self.actions_bar
        bar.move(rect.right() - bar.width() - 12, rect.top() + 4)
        bar.raise_()

    def current_message(self) -> QModelIndex:
        index = getattr(self, "_actions_index", None)
        return index if index is not None and index.isValid() else self.currentIndex()

    def copy_current(self) -> None:
        index = self.current_message()
        if index.isValid():
            QGuiApplication.clipboard().setText(index.data(Qt.ItemDataRole.DisplayRole) or "")

    def edit_current(self) -> None:
        index = self.current_message()
        if index.isValid() and index.data(MessageRoles.ROLE) == "user":
            self.editRequested.emit(index.data(MessageRoles.MESSAGE_ID), index.data(Qt.ItemDataRole.DisplayRole))

    def _add_shortcuts(self) -> None:
        copy = QAction("Copy message", self)
        copy.setShortcut(QKeySequence.StandardKey.Copy)
        copy.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        copy.triggered.connect(self.copy_current)
        edit = QAction("Edit message", self)
        edit.setShortcut(QKeySequence(Qt.Key.Key_F2))
        edit.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        edit.triggered.connect(self.edit_current)
        self.addActions([copy, edit])

    def _context_menu(self, point) -> None:
        index = self.indexAt(point)
        if not index.isValid():
            return
        self.setCurrentIndex(index)
        menu = QMenu(self)
        menu.addAction("Copy", self.copy_current)
        if index.data(MessageRoles.IS_LAST_ANSWER):
            menu.addAction("Regenerate", self.regenerateRequested.emit)
        if index.data(MessageRoles.ROLE) == "user":
            menu.addAction("Edit and resend…", self.edit_current)
        menu.popup(self.viewport().mapToGlobal(point))

    def paintEvent(self, event) -> None:  # Override: an empty chat says what it is for.
        super().paintEvent(event)
        if self.model() is not None and self.model().rowCount() == 0:
            painter = QPainter(self.viewport())
            painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(self.viewport().rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
                             "Ask anything. Answers are written on this computer;\nnothing you type leaves it.")
            painter.end()

    def viewportEvent(self, event) -> bool:  # Override: links in answers open on click.
        if event.type() == QEvent.Type.MouseButtonRelease and event.button() == Qt.MouseButton.LeftButton:
            index = self.indexAt(event.position().toPoint())
            if index.isValid():
                url = QUrl(self.delegate.anchor_at(index, event.position().toPoint()))
                # Only web and mail links: a model's answer must not open local files.
                if url.scheme() in ("http", "https", "mailto"):
                    QDesktopServices.openUrl(url)
                    return True
        return super().viewportEvent(event)
