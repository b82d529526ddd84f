"""MessageView: the conversation as a list, with copy / regenerate / edit on each message."""

from __future__ import annotations

import time

from PySide6.QtCore import QEvent, QModelIndex, QPersistentModelIndex, QRect, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices, QGuiApplication, QKeySequence, QPainter, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QListView, QMenu, QStyleOptionViewItem,
                               QToolButton, QWidget)

from app.ui.bridge import FramePacer
from app.ui.message_delegate import MessageDelegate
from app.ui.message_model import MessageListModel, MessageRoles


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
    """Stays at the bottom while an answer streams, unless the user scrolled up.

    A growing answer (a row whose text alone changed) is drawn on `pacer`'s clock, not at
    every change: more often when drawing it is cheap, less when it is dear. A frame
    repaints that row only, and lays the list out again only when the row grew taller.
    The model's rows are a long chat's newest messages; the view asks it for older ones
    when the user scrolls up to them.
    """

    regenerateRequested = Signal()
    editRequested = Signal(int, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # First: Qt calls the overrides below from the setters that follow.
        self.pacer = FramePacer()
        self._growing: list[QPersistentModelIndex] = []
        # Row -> the height the list was last laid out with, for the rows that grew.
        self._laid_out: dict[int, int] = {}
        self._growth_timer = QTimer(self)
        self._growth_timer.setSingleShot(True)
        self._growth_timer.timeout.connect(self.redraw_growing)
        self._frame_pending = False
        self._exposed: QRect | None = None
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
        self._reset()

    def _rows_inserted(self) -> None:
        if self._follow:
            self.scrollToBottom()

    def _reset(self) -> None:
        self._growing.clear()
        self._laid_out.clear()
        self._growth_timer.stop()
        self.delegate.forget_rows()
        self.actions_bar.hide()
        self._follow = True
        self.scrollToBottom()

    def _show_older(self) -> None:
        """The user scrolled up to the oldest message shown: show older ones above it, in place."""
        model = self.model()
        assert isinstance(model, MessageListModel)
        more = model.show_older()
        if not more:
            return
        # The rows that grew keep their heights under their new numbers.
        self._laid_out = {row + more: height for row, height in self._laid_out.items()}
        option = QStyleOptionViewItem()
        added = sum(self.delegate.sizeHint(option, model.index(row, 0)).height() for row in range(more))
        self.executeDelayedItemsLayout()
        bar = self.verticalScrollBar()
        bar.setValue(bar.value() + added)

    # --- following the end ------------------------------------------------------------

    def scroll_to_end(self) -> None:
        """Jump to the newest message and keep following it."""
        self._follow = True
        self.scrollToBottom()

    def _scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._follow = value >= bar.maximum() - 4
        if value < self.viewport().height():
            self._show_older()
        self._place_actions()

    def _range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(maximum)

    # --- a growing answer --------------------------------------------------------------

    def dataChanged(self, top_left, bottom_right, roles=()) -> None:  # Override QListView.dataChanged.
        # QListView lays out every row for any change; a growing answer waits for its frame.
        if top_left == bottom_right and [int(role) for role in roles] == [int(Qt.ItemDataRole.DisplayRole)]:
            self._growing.append(QPersistentModelIndex(top_left))
            if not self._growth_timer.isActive():
                self._growth_timer.start(self.pacer.delay_ms(_now_ms()))
            return
        super().dataChanged(top_left, bottom_right, roles)

    def redraw_growing(self) -> None:
        """Draw the answers that grew since the last frame (the pacer's timer calls this)."""
        self._growth_timer.stop()
        started = _now_ms()
        growing, self._growing = self._growing, []
        model = self.model()
        for row in sorted({index.row() for index in growing if index.isValid()}):
            index = model.index(row, 0)
            height = self.delegate.sizeHint(QStyleOptionViewItem(), index).height()
            changed = self.delegate.growth_rect(index, self.visualRect(index))
            # visualRect() has the new height at the old place: the rows below, the scroll
            # range and which rows a paint event meets move only when the list is laid out
            # again (QListView keeps no other account of a row's height).
            if self._laid_out.get(row) != height:
                self._laid_out[row] = height
                super().dataChanged(index, index, [Qt.ItemDataRole.DisplayRole])  # Lays the list out.
            else:
                self.viewport().update(changed)
        self.pacer.drawing(started, _now_ms() - started)
        self._frame_pending = True

    def doItemsLayout(self) -> None:  # Override QListView.doItemsLayout: timed for the pacer.
        started = _now_ms()
        super().doItemsLayout()
        model, option = self.model(), QStyleOptionViewItem()
        for row in [row for row in self._laid_out if row < model.rowCount()]:
            self._laid_out[row] = self.delegate.sizeHint(option, model.index(row, 0)).height()
        if self._frame_pending:
            self.pacer.add_cost(_now_ms() - started)

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

    def exposed_rect(self) -> QRect:
        """The part of the viewport being painted now (all of it outside a paint event)."""
        return QRect(self._exposed) if self._exposed is not None else self.viewport().rect()

    def paintEvent(self, event) -> None:  # Override: an empty chat says what it is for.
        started = _now_ms()
        self._exposed = event.rect()
        try:
            super().paintEvent(event)
        finally:
            self._exposed = None
        if self._frame_pending:
            self._frame_pending = False
            self.pacer.add_cost(_now_ms() - started)
        if self.model() is not None and self.model().rowCount() == 0:
            painter = QPainter(self.viewport())
            painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(self.viewport().rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
                             "Ask anything. Answers are written on this computer;\nnothing you type leaves it.")
            painter.end()

    def viewportEvent(self, event) -> bool:  # Override: links in answers open on click.
        if event.type() == QEvent.Type.MouseButtonRelease and event.button() == Qt.MouseButton.LeftButton:
            index = self.indexAt(event.position().toPoint())
            if index.isValid() and self.delegate.thinking_header_at(index, event.position().toPoint()):
                self.delegate.toggle_thinking(index)
                return True
            if index.isValid():
                url = QUrl(self.delegate.anchor_at(index, event.position().toPoint()))
                # Only web and mail links: a model's answer must not open local files.
                if url.scheme() in ("http", "https", "mailto"):
                    QDesktopServices.openUrl(url)
                    return True
        return super().viewportEvent(event)


def _now_ms() -> float:
    return time.perf_counter() * 1000
