"""Drives read-aloud from the window: each answer's speaker (its icon, menu item and shortcut) and Escape."""

from __future__ import annotations

from collections.abc import Callable
from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QWidget

from app.core.conversation import Message, MessageState, Role
from app.service.doors.read_aloud import ReadAloudDoor
from app.service.voice.read_aloud_events import ReadAloudEvent, ReadAloudFailed, ReadAloudState, ReadAloudStateChanged
from app.ui.messages.message_view import MessageView
from app.ui.voice.read_aloud_words import failed_words


class ReadAloudControl(QObject):
    """The answers' speaker. A press asks the service to read that answer (or to stop, while it is read) and
    returns at once; the service's events (on this thread: the loop is Qt's) turn that answer's speaker into
    a Stop and back, and a failure is said in the chat's banner. Escape in the list stops the reading.
    `messages` gives the chat's messages, for the shortcut's answer (the list's current one, else the last)."""

    def __init__(self, door: ReadAloudDoor, view: MessageView, widget: QWidget, *,
                 messages: Callable[[], list[Message]], show_problem: Callable[[str], None]) -> None:
        super().__init__(widget)
        self._door = door
        self._view = view
        self._messages = messages
        self._show_problem = show_problem
        view.readAloudRequested.connect(self.press)
        self.escape = QShortcut(QKeySequence(Qt.Key.Key_Escape), view)
        self.escape.setContext(Qt.ShortcutContext.WidgetShortcut)
        self.escape.setEnabled(False)  # only while an answer is read: Escape is the list's own otherwise
        self.escape.activated.connect(door.stop)
        unsubscribe = door.subscribe(self._hear)
        widget.destroyed.connect(lambda *_: unsubscribe())  # no event reaches a window that is gone
        view.set_reading(True, None)

    @property
    def reading(self) -> int | None:
        """The answer read aloud now (None when none is)."""
        return self._door.message_id if self._door.state is not ReadAloudState.IDLE else None

    def press(self, message: Message) -> None:
        """An answer's speaker (or its Stop): read it, or stop it, without waiting for either."""
        self._door.toggle(message.id, message.text)

    def press_current(self) -> None:
        """The shortcut: stop the reading if there is one, else read the list's current answer (or the last)."""
        if self.reading is not None:
            self._door.stop()
            return
        index = self._view.current_message()
        current = self._view.delegate.message(index) if index.isValid() else None
        if current is None or current.role != Role.ASSISTANT or current.state == MessageState.STREAMING:
            answers = [message for message in self._messages()
                       if message.role == Role.ASSISTANT and message.state != MessageState.STREAMING]
            current = answers[-1] if answers else None
        if current is not None and current.text.strip():
            self._door.read(current.id, current.text)

    def _hear(self, event: ReadAloudEvent) -> None:
        if isinstance(event, ReadAloudStateChanged):
            reading = event.message_id if event.state is not ReadAloudState.IDLE else None
            self._view.set_reading(True, reading)
            self.escape.setEnabled(reading is not None)
        elif isinstance(event, ReadAloudFailed):
            self._show_problem(failed_words(event))
