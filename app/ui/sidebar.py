"""The window's sidebar: new chat, search, and the chats with their dates and busy, waiting and draft markers."""

from __future__ import annotations

import math
import time
from datetime import datetime
from typing import Protocol

from PySide6.QtCore import (QEvent, QModelIndex, QPersistentModelIndex, QRect, QSize, Qt,
                            QTimer, Signal)
from PySide6.QtGui import QAction, QColor, QFont, QFontMetrics, QHelpEvent, QKeySequence, QPainter, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QLineEdit, QListView, QPushButton, QStyle,
                               QStyledItemDelegate, QStyleOptionViewItem, QToolTip, QVBoxLayout, QWidget)

from app.ui import icons
from app.ui.conversation_model import ConversationFilter, ConversationListModel, ConversationRoles

# Typing in the search box waits this long for a pause before searchChanged.
SEARCH_DEBOUNCE_MS = 200
# The busy dot pulses at this frame interval, and only while some chat is answering.
PULSE_MS = 80

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# What each marker means, for the tooltip (the marker itself is only a glyph).
MARKER_WORDS = {"busy": "Writing an answer…", "waiting": "Waiting for another chat's answer",
                "edit": "Has an unsent draft"}

_Index = QModelIndex | QPersistentModelIndex


def relative_date(ts: float, now: datetime) -> str:
    """When a chat was last changed, as people say it: "14:02", "Yesterday", "Tuesday", "12 Mar", "12 Mar 2025".

    ts is epoch seconds, now a local naive datetime. Names are English on purpose: the
    rest of the window is too, and a locale's month names would mix languages.
    """
    then = datetime.fromtimestamp(ts)
    days = (now.date() - then.date()).days
    if days == 0:
        return f"{then:%H:%M}"
    if days == 1:
        return "Yesterday"
    if 1 < days < 7:  # a week ago would share today's weekday name
        return _WEEKDAYS[then.weekday()]
    day_month = f"{then.day} {_MONTHS[then.month - 1]}"
    return day_month if then.year == now.year else f"{day_month} {then.year}"


class ConversationDelegate(QStyledItemDelegate):
    """Paints one chat per row: the title elided on one line, markers, and the date right-aligned and muted.

    Colours are read from the view's palette at paint time, so rows follow a theme change.
    `pulse` (0..1) is the busy dot's brightness; the Sidebar moves it while a chat answers.
    """

    PAD_X, PAD_Y, GAP, MARKER = 10, 8, 6, 14

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.pulse = 1.0

    # --- what a row shows (also what the tests check) --------------------------------

    def markers(self, index: _Index) -> tuple[str, ...]:
        """The icon names this row draws, left to right."""
        flags = (("busy", ConversationRoles.ANSWERING), ("waiting", ConversationRoles.WAITING),
                 ("edit", ConversationRoles.HAS_DRAFT))
        return tuple(name for name, role in flags if index.data(role))

    def date_text(self, index: _Index, now: datetime | None = None) -> str:
        updated = index.data(ConversationRoles.UPDATED)
        return "" if updated is None else relative_date(float(updated), now or datetime.now())

    def elided_title(self, index: _Index, width: int, font: QFont) -> str:
        """The title as painted in width pixels: one line, "…" at the end when it does not fit."""
        title = " ".join(str(index.data() or "").split())  # a pasted title may hold newlines
        return QFontMetrics(font).elidedText(title, Qt.TextElideMode.ElideRight, max(width, 0))

    def date_font(self, font: QFont) -> QFont:
        small = QFont(font)
        small.setPointSizeF(font.pointSizeF() * 0.88)
        return small

    def title_rect(self, option: QStyleOptionViewItem, index: _Index) -> QRect:
        """Where the title goes: what the date and markers leave of the row."""
        date = self.date_text(index)
        date_width = QFontMetrics(self.date_font(option.font)).horizontalAdvance(date) if date else 0
        marks = len(self.markers(index))
        right = date_width + marks * (self.MARKER + self.GAP) + (self.GAP * 2 if date else 0)
        return option.rect.adjusted(self.PAD_X, 0, -self.PAD_X - right, 0)

    # --- painting ---------------------------------------------------------------------

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:  # Override QStyledItemDelegate.
        return QSize(120, QFontMetrics(option.font).height() + 2 * self.PAD_Y)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:  # Override.
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        self._paint_background(painter, option)
        palette, rect = option.palette, option.rect
        date = self.date_text(index)
        right = rect.right() - self.PAD_X
        if date:
            small = self.date_font(option.font)
            painter.setFont(small)
            painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
            width = QFontMetrics(small).horizontalAdvance(date)
            painter.drawText(QRect(right - width, rect.top(), width, rect.height()),
                             int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight), date)
            right -= width + self.GAP * 2
        for name in reversed(self.markers(index)):
            right -= self.MARKER
            self._paint_marker(painter, name, QRect(right, rect.center().y() - self.MARKER // 2 + 1,
                                                    self.MARKER, self.MARKER), palette)
            right -= self.GAP
        title_rect = self.title_rect(option, index)
        painter.setFont(option.font)
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        painter.drawText(title_rect, int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft),
                         self.elided_title(index, title_rect.width(), option.font))
        painter.restore()

    def _paint_background(self, painter: QPainter, option: QStyleOptionViewItem) -> None:
        """Rounded selection and hover, light enough that the row's text keeps its own colour."""
        state, palette = option.state, option.palette
        box = option.rect.adjusted(4, 1, -4, -1)
        fill: QColor | None = None
        if state & QStyle.StateFlag.State_Selected:
            fill = QColor(palette.color(QPalette.ColorRole.Highlight))
            fill.setAlphaF(0.30 if state & QStyle.StateFlag.State_HasFocus else 0.22)
        elif state & QStyle.StateFlag.State_MouseOver:
            fill = QColor(palette.color(QPalette.ColorRole.Text))
            fill.setAlphaF(0.07)
        painter.setPen(Qt.PenStyle.NoPen)
        if fill is not None:
            painter.setBrush(fill)
            painter.drawRoundedRect(box, 6, 6)
        if state & QStyle.StateFlag.State_HasFocus and not state & QStyle.StateFlag.State_Selected:
            # The keyboard's place in the list, when it is on a row that is not selected.
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(palette.color(QPalette.ColorRole.Highlight))
            painter.drawRoundedRect(box, 6, 6)

    def _paint_marker(self, painter: QPainter, name: str, box: QRect, palette: QPalette) -> None:
        if name == "busy":
            accent = QColor(palette.color(QPalette.ColorRole.Highlight))
            accent.setAlphaF(0.35 + 0.65 * self.pulse)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(accent)
            painter.drawEllipse(box.center(), 4, 4)
            return
        color = palette.color(QPalette.ColorRole.PlaceholderText)
        ratio = painter.device().devicePixelRatioF() if painter.device() else 1.0
        painter.drawPixmap(box, _pixmap(name, box.width(), color, ratio))

    # --- rename and tooltip -----------------------------------------------------------

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index: _Index) -> None:  # Override.
        editor.setGeometry(option.rect.adjusted(4, 2, -4, -2))

    def helpEvent(self, event: QHelpEvent, view: QAbstractItemView, option: QStyleOptionViewItem,
                  index: _Index) -> bool:  # Override QStyledItemDelegate.helpEvent.
        if event.type() != QEvent.Type.ToolTip or not index.isValid():
            return super().helpEvent(event, view, option, index)
        lines = [str(index.data(Qt.ItemDataRole.ToolTipRole) or index.data() or "")]
        lines += [MARKER_WORDS[name] for name in self.markers(index)]
        QToolTip.showText(event.globalPos(), "\n".join(lines), view)
        return True


_pixmaps: dict[tuple[str, int, str, float], object] = {}


def _pixmap(name: str, size: int, color: QColor, ratio: float):
    """icons.pixmap, kept per (name, size, colour, ratio): rows repaint often, the colours rarely change."""
    key = (name, size, color.name(QColor.NameFormat.HexArgb), ratio)
    if key not in _pixmaps:
        _pixmaps[key] = icons.pixmap(name, size, color, ratio)
    return _pixmaps[key]


class ListsConversations(Protocol):
    """What the sidebar needs of the ControllerAdapter."""

    conversations: ConversationListModel


class Sidebar(QWidget):
    """New chat, search and the chat list, over the adapter's `conversations` model.

    Signals: newChatRequested(); conversationChosen(id) on a click or Enter (also for
    the chat already open: the window decides); searchChanged(text) once typing pauses
    for SEARCH_DEBOUNCE_MS; deleteRequested(id, title) from the menu or the Delete key
    (the window asks before deleting). A rename in place goes to the list model, which
    asks for it to be saved. Attributes: new_button, search, conversation_list, delegate,
    filter (the ConversationFilter the window gives search results to).
    """

    newChatRequested = Signal()
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
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search chats (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.setAccessibleName("Search chats")
        icons.themed(self.search.addAction(icons.icon("search"), QLineEdit.ActionPosition.LeadingPosition),
                     "search", QPalette.ColorRole.PlaceholderText)
        self.filter = ConversationFilter(self)
        self.filter.setSourceModel(adapter.conversations)
        self.conversation_list = self._build_list()
        self._search_timer = QTimer(self, singleShot=True, interval=SEARCH_DEBOUNCE_MS)
        self._pulse_timer = QTimer(self, interval=PULSE_MS)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 4, 8)
        layout.setSpacing(6)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.conversation_list, 1)
        self._connect()

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
