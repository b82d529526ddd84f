"""The window's sidebar: new chat (or a temporary one), search, and the chat list (painted by ConversationDelegate)."""

from __future__ import annotations

import math
import time
from datetime import datetime
from typing import Protocol

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QLabel, QLineEdit, QListView, QMenu, QPushButton,
                               QToolButton, QVBoxLayout, QWidget)

from app.ui.common import icons
from app.ui.projects.projects_panel import ProjectsPanel
from app.ui.chat.conversation_delegate import MARKER_WORDS, ConversationDelegate, markers, relative_date
from app.ui.state.conversation_model import ConversationFilter, ConversationListModel, ConversationRoles

__all__ = ["ConversationDelegate", "Sidebar", "relative_date"]

# Typing in the search box waits this long for a pause before searchChanged.
SEARCH_DEBOUNCE_MS = 200
# The busy dot pulses at this frame interval, and only while some chat is answering.
PULSE_MS = 80
# Shown above the list while the open chat is a temporary one: it is in no row of the list.
TEMPORARY_LINE = "Temporary chat: not saved, no memory"
TEMPORARY_TIP = ("This chat is not saved in your chats or on disk, uses no memory and keeps none. "
                 "It is gone once you start or open another chat, or close Kestrel.")


class DescribedConversations(ConversationFilter):
    """The search filter, also telling screen readers what the row's markers and date show."""

    def data(self, index: QModelIndex | QPersistentModelIndex,
             role: int = Qt.ItemDataRole.DisplayRole) -> object:  # Override QSortFilterProxyModel.data.
        if role != Qt.ItemDataRole.AccessibleDescriptionRole or not index.isValid():
            return super().data(index, role)
        words = [MARKER_WORDS[name] for name in markers(index)]
        updated = index.data(ConversationRoles.UPDATED)
        if updated is not None:
            words.append(f"changed {relative_date(float(updated), datetime.now())}")
        return ", ".join(words)


class ListsConversations(Protocol):
    """What the sidebar needs of the ServiceAdapter."""

    conversations: ConversationListModel


class Sidebar(QWidget):
    """New chat, search and the chat list, over the adapter's `conversations` model.

    Signals: newChatRequested(); temporaryChatRequested() (the New chat button's menu);
    conversationChosen(id) on a click or Enter (also for
    the chat already open: the window decides); searchChanged(text) once typing pauses
    for SEARCH_DEBOUNCE_MS; deleteRequested(id, title) from the menu or the Delete key
    (the window asks before deleting). A rename in place goes to the list model, which
    asks for it to be saved. Attributes: new_button, new_menu_button (its menu: New temporary chat),
    temporary_line (shown while a temporary chat is open: show_temporary), search, conversation_list,
    delegate, filter (the ConversationFilter the window gives search results to).
    """

    newChatRequested = Signal()
    temporaryChatRequested = Signal()
    conversationChosen = Signal(int)
    searchChanged = Signal(str)
    deleteRequested = Signal(int, str)

    def __init__(self, adapter: ListsConversations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._conversations = adapter.conversations
        self._selected: int | None = None
        self._answering: list[QPersistentModelIndex] = []
        self.new_button = QPushButton("New chat", self)
        self.new_button.setToolTip("Start a new chat (Ctrl+N)")
        icons.themed(self.new_button, "new-chat")
        self.new_menu_button, self.temporary_action = self._build_new_menu()
        self.temporary_line = self._build_temporary_line()
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search chats (Ctrl+F)")
        self.search.setAccessibleName("Search chats")
        icons.themed(self.search.addAction(icons.icon("search"), QLineEdit.ActionPosition.LeadingPosition),
                     "search", QPalette.ColorRole.PlaceholderText)
        # Our own clear button: Qt's grey disc hardly shows on the dark palette, and giving
        # Qt's button another icon makes it show on an empty field too.
        self.clear_action = self.search.addAction(icons.icon("close"), QLineEdit.ActionPosition.TrailingPosition)
        self.clear_action.setToolTip("Clear the search")
        self.clear_action.setVisible(False)
        icons.themed(self.clear_action, "close", QPalette.ColorRole.PlaceholderText)
        self.filter = DescribedConversations(self)
        self.filter.setSourceModel(adapter.conversations)
        self.conversation_list = self._build_list()
        self.projects = ProjectsPanel(self)  # the Projects grouping: the window's ProjectsHost drives it
        self._search_timer = QTimer(self, singleShot=True, interval=SEARCH_DEBOUNCE_MS)
        self._pulse_timer = QTimer(self, interval=PULSE_MS)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 4, 8)
        layout.setSpacing(6)
        new_row = QHBoxLayout()
        new_row.setSpacing(2)
        new_row.addWidget(self.new_button, 1)
        new_row.addWidget(self.new_menu_button)
        layout.addLayout(new_row)
        layout.addWidget(self.temporary_line)
        layout.addWidget(self.search)
        layout.addWidget(self.projects)
        layout.addWidget(self.conversation_list, 1)
        self._connect()

    def _build_new_menu(self) -> tuple[QToolButton, QAction]:
        """The arrow beside New chat: its menu offers a temporary chat (a split button, as chat apps have)."""
        button = QToolButton(self)
        button.setObjectName("newChatMenu")
        button.setAccessibleName("More ways to start a chat")
        button.setToolTip("More ways to start a chat")
        button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        button.setStyleSheet("QToolButton::menu-indicator{image:none}")  # the arrow icon is the indicator
        icons.themed(button, "down")
        menu = QMenu(button)
        temporary = menu.addAction("New temporary chat")
        temporary.setShortcut(QKeySequence("Ctrl+Shift+N"))  # shown here; the File menu's action holds the key
        temporary.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        temporary.setToolTip(TEMPORARY_TIP)
        icons.themed(temporary, "temporary", icons.ROLE.WindowText)
        temporary.triggered.connect(self.temporaryChatRequested)
        button.setMenu(menu)
        return button, temporary

    def _build_temporary_line(self) -> QWidget:
        line = QWidget(self)
        line.setObjectName("temporaryChat")
        line.setToolTip(TEMPORARY_TIP)
        mark = self._temporary_mark = QLabel(line)
        words = QLabel(TEMPORARY_LINE, line)
        words.setObjectName("temporaryChatWords")
        words.setWordWrap(True)
        words.setAccessibleDescription(TEMPORARY_TIP)
        row = QHBoxLayout(line)
        row.setContentsMargins(6, 4, 6, 4)
        row.addWidget(mark, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(words, 1)
        line.setAutoFillBackground(True)
        line.setBackgroundRole(QPalette.ColorRole.AlternateBase)
        line.hide()
        return line

    def _build_list(self) -> QListView:
        view = QListView(self)
        view.setObjectName("conversations")
        view.setAccessibleName("Chats")
        view.setModel(self.filter)
        self.delegate = ConversationDelegate(view)
        view.setItemDelegate(self.delegate)
        view.setUniformItemSizes(True)
        view.setMouseTracking(True)  # hover rows
        view.setFrameShape(QListView.Shape.NoFrame)
        view.viewport().setBackgroundRole(QPalette.ColorRole.Window)
        view.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        view.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed
                             | QAbstractItemView.EditTrigger.DoubleClicked)
        view.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.rename_action = QAction("Rename", view)
        self.rename_action.setShortcut(QKeySequence(Qt.Key.Key_F2))
        self.delete_action = QAction("Delete…", view)
        self.delete_action.setShortcut(QKeySequence.StandardKey.Delete)
        for action, name in ((self.rename_action, "edit"), (self.delete_action, "delete")):
            # Only while the list has focus: F2 or Delete in the search box edit its text.
            action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
            icons.themed(action, name)
        view.addActions([self.rename_action, self.delete_action])
        return view

    def _connect(self) -> None:
        view = self.conversation_list
        self.new_button.clicked.connect(self.newChatRequested)
        self.search.textChanged.connect(lambda: self._search_timer.start())
        self.search.textChanged.connect(lambda text: self.clear_action.setVisible(bool(text)))
        self.clear_action.triggered.connect(self.search.clear)
        self._search_timer.timeout.connect(lambda: self.searchChanged.emit(self.search.text()))
        view.clicked.connect(self._choose)
        view.activated.connect(self._choose)
        self.rename_action.triggered.connect(lambda: view.edit(view.currentIndex()))
        self.delete_action.triggered.connect(self.delete_current)
        self._pulse_timer.timeout.connect(self._pulse)
        model = self.filter
        for signal in (model.modelReset, model.rowsInserted, model.rowsRemoved, model.layoutChanged,
                       model.rowsMoved):
            signal.connect(self._rows_changed)
        model.dataChanged.connect(self._data_changed)

    # --- what the window calls --------------------------------------------------------

    def select(self, conversation_id: int | None) -> None:
        """Show conversation_id as the open chat (None: none), without conversationChosen."""
        self._selected = conversation_id
        view = self.conversation_list
        index = self._index_of(conversation_id)
        if index.isValid():
            view.setCurrentIndex(index)
            view.scrollTo(index)
        else:
            view.selectionModel().clear()

    def show_temporary(self, temporary: bool) -> None:
        """The open chat is a temporary one (no row of the list is it): the line above the list says so."""
        if temporary:  # drawn now: in the theme's colours of now
            self._temporary_mark.setPixmap(icons.icon("temporary", icons.ROLE.Highlight).pixmap(16, 16))
        self.temporary_line.setVisible(temporary)

    def delete_current(self) -> None:
        index = self.conversation_list.currentIndex()
        conversation_id = index.data(ConversationRoles.ID)
        if conversation_id is not None:
            self.deleteRequested.emit(int(conversation_id), str(index.data() or ""))

    # --- reacting ---------------------------------------------------------------------

    def _choose(self, index: QModelIndex) -> None:
        conversation_id = index.data(ConversationRoles.ID)
        if conversation_id is not None:
            self.conversationChosen.emit(int(conversation_id))

    def _index_of(self, conversation_id: int | None) -> QModelIndex:
        if conversation_id is None:
            return QModelIndex()
        row = self._conversations.row_of(conversation_id)
        return QModelIndex() if row is None else self.filter.mapFromSource(self._conversations.index(row, 0))

    def _rows_changed(self, *_: object) -> None:
        # A reset, or a search that hid and showed the open chat again, drops the selection.
        index = self._index_of(self._selected)
        if index.isValid() and self.conversation_list.currentIndex() != index:
            self.select(self._selected)
        self._find_answering()

    def _data_changed(self, first: QModelIndex, last: QModelIndex, roles: list[int]) -> None:
        if not roles or ConversationRoles.ANSWERING in roles:
            self._find_answering()

    def _find_answering(self) -> None:
        """Run the pulse timer only while some shown chat answers: an idle list costs nothing."""
        model = self.filter
        rows = (model.index(row, 0) for row in range(model.rowCount()))
        self._answering = [QPersistentModelIndex(i) for i in rows if i.data(ConversationRoles.ANSWERING)]
        if self._answering and not self._pulse_timer.isActive():
            self._pulse_timer.start()
        elif not self._answering:
            self._pulse_timer.stop()
            self.delegate.pulse = 1.0

    def _pulse(self) -> None:
        self.delegate.pulse = 0.5 + 0.5 * math.cos(time.monotonic() * math.pi)  # one breath each 2 s
        for index in self._answering:
            if index.isValid():
                self.conversation_list.update(self.filter.index(index.row(), 0))
