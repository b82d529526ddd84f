"""The mouse over the message list: action icons, links, the thinking header, and text selection."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, QPoint, QPointF, QRect, Qt
from PySide6.QtGui import QCursor, QMouseEvent
from PySide6.QtWidgets import QApplication
from shiboken6 import isValid

from app.core.conversation import Message, MessageState
from app.ui.messages.message_memories import MEMORIES
from app.ui.messages.message_selection import MessageList, SelectableText


class PointedDelegate(Protocol):
    """What the pointer asks of the list's MessageDelegate (which cannot be imported here:
    the view that imports this module imports it)."""

    hovered: tuple[int, str] | None

    def message(self, index: QModelIndex) -> Message: ...

    def action_rects(self, index: QModelIndex) -> list[tuple[str, QRect]]: ...

    def action_at(self, index: QModelIndex, point: QPoint) -> str | None: ...

    def anchor_at(self, index: QModelIndex, point: QPoint) -> str: ...

    def text_at(self, index: QModelIndex, point: QPoint) -> bool: ...

    def thinking_header_at(self, index: QModelIndex, point: QPoint) -> bool: ...

    def memories_at(self, index: QModelIndex, point: QPoint) -> bool: ...

    def image_at(self, index: QModelIndex, point: QPoint) -> int | None: ...

    def code_bar_at(self, index: QModelIndex, point: QPoint) -> int | None: ...

    def scroll_code(self, index: QModelIndex, number: int, by: float = 0.0, bar_x: int | None = None) -> bool: ...


class MessagePointer(QObject):
    """Watches the view's viewport: hover marks the action under the mouse, a click runs it,
    a press on a message's text opens the selection editor there and hands it the drag.

    The press arrived before the editor existed, so the list keeps the mouse until the
    button is released; until then its moves and the release are passed on to the editor.
    A press on a wide code block's small bar drags the block sideways instead.
    """

    def __init__(self, view: MessageList, delegate: PointedDelegate) -> None:
        super().__init__(view)
        self._view = view
        self._delegate = delegate
        self._dragging: SelectableText | None = None  # the editor being handed the drag
        self._pressed: tuple[QPersistentModelIndex, str] | None = None  # an action, until released
        self._forwarding = False
        self._lit: QRect | None = None  # the icon drawn lit, where it was
        self._bar: tuple[QPersistentModelIndex, int] | None = None  # a code block's bar being dragged
        view.viewport().installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Override QObject.eventFilter.
        if self._forwarding:
            return True  # what the editor left unhandled comes back up to the list: drop it
        kind = event.type()
        if isinstance(event, QMouseEvent):
            if kind == QEvent.Type.MouseMove:
                return self._moved(event)
            if kind == QEvent.Type.MouseButtonPress and event.button() == Qt.MouseButton.LeftButton:
                return self._pressed_at(event)
            if kind == QEvent.Type.MouseButtonRelease and event.button() == Qt.MouseButton.LeftButton:
                return self._released(event)
        if kind == QEvent.Type.Leave:
            self._hover(None, None, None)
        return False

    def _at(self, event: QMouseEvent) -> tuple[QPoint, QModelIndex]:
        point = event.position().toPoint()
        return point, self._view.indexAt(point)

    def _moved(self, event: QMouseEvent) -> bool:
        if self._dragging is not None:
            self._forward(event)
            return True
        if self._bar is not None:
            self._drag_bar(event)
            return True
        point, index = self._at(event)
        action = self._delegate.action_at(index, point) if index.isValid() else None
        if action is None and index.isValid() and self._delegate.memories_at(index, point):
            action = MEMORIES  # lit like an icon: its words are underlined
        self._hover(index if action else None, action, point)
        self._view.viewport().setCursor(self._cursor(index, point, action))
        return False

    def _cursor(self, index: QModelIndex, point: QPoint, action: str | None) -> QCursor:
        delegate = self._delegate
        if action or (index.isValid() and (delegate.anchor_at(index, point)
                                           or delegate.thinking_header_at(index, point)
                                           or delegate.image_at(index, point) is not None)):
            return QCursor(Qt.CursorShape.PointingHandCursor)
        if index.isValid() and self._selectable(index) and delegate.text_at(index, point):
            return QCursor(Qt.CursorShape.IBeamCursor)
        return QCursor(Qt.CursorShape.ArrowCursor)

    def _hover(self, index: QModelIndex | None, action: str | None, point: QPoint | None) -> None:
        delegate = self._delegate
        hovered = (delegate.message(index).id, action) if index is not None and action else None
        if hovered == delegate.hovered:
            return
        delegate.hovered = hovered
        # Only the icon that lit up and the one that went out: not the rows around them.
        viewport = self._view.viewport()
        if self._lit is not None:
            viewport.update(self._lit)
        self._lit = None
        if index is not None and point is not None:
            self._lit = next((rect for _name, rect in delegate.action_rects(index) if rect.contains(point)),
                             self._view.visualRect(index) if action == MEMORIES else None)
            if self._lit is not None:
                viewport.update(self._lit)

    def _selectable(self, index: QModelIndex) -> bool:
        return self._delegate.message(index).state != MessageState.STREAMING

    def _pressed_at(self, event: QMouseEvent) -> bool:
        point, index = self._at(event)
        view, delegate = self._view, self._delegate
        view.close_selection(keep_focus=True)
        if not index.isValid():
            return False
        bar = delegate.code_bar_at(index, point)
        if bar is not None:
            self._bar = (QPersistentModelIndex(index), bar)
            self._drag_bar(event)
            return True
        action = delegate.action_at(index, point)
        if action is not None:
            self._pressed = (QPersistentModelIndex(index), action)
            view.setCurrentIndex(index)
            return True
        if delegate.thinking_header_at(index, point) or delegate.anchor_at(index, point):
            return False  # the release opens it
        if self._selectable(index) and delegate.text_at(index, point):
            editor = view.open_selection(index)
            if editor is not None:
                self._dragging = editor
                self._forward(event)
                return True
        return False

    def _released(self, event: QMouseEvent) -> bool:
        if self._dragging is not None:
            self._forward(event)
            self._dragging = None
            return True
        if self._bar is not None:
            self._bar = None
            return True
        pressed, self._pressed = self._pressed, None
        if pressed is None:
            return False
        point, index = self._at(event)
        index_then, action = pressed
        if index_then.isValid() and index.row() == index_then.row() and \
                self._delegate.action_at(index, point) == action:
            self._view.run_action(index, action)
        return True

    def _drag_bar(self, event: QMouseEvent) -> None:
        """Move the dragged bar's code block to follow the mouse."""
        if self._bar is None or not self._bar[0].isValid():
            self._bar = None
            return
        index = self._view.model().index(self._bar[0].row(), 0)
        if self._delegate.scroll_code(index, self._bar[1], bar_x=event.position().toPoint().x()):
            self._view.code_moved(index)

    def _forward(self, event: QMouseEvent) -> None:
        """Hand a mouse event on to the editor's text, in its coordinates."""
        if self._dragging is None or not isValid(self._dragging):
            self._dragging = None  # closed under the mouse (the chat changed)
            return
        target = self._dragging.viewport()
        local = QPointF(target.mapFrom(self._view.viewport(), event.position().toPoint()))
        copy = QMouseEvent(event.type(), local, event.globalPosition(), event.button(), event.buttons(),
                           event.modifiers())
        self._forwarding = True
        try:
            QApplication.sendEvent(target, copy)
        finally:
            self._forwarding = False
