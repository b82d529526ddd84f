"""DraftKeeper: each chat's unsent text survives switching chats and restarting Kestrel."""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QTextCursor

from app.service.doors.chat import ChatDoor
from app.ui.chat.composer import Composer

# Typing saves the draft after this pause (the service writes it off the UI thread).
SAVE_AFTER_MS = 600


class DraftKeeper(QObject):
    """Saves the composer's text as the draft of the chat it was typed in, and puts a
    chat's draft back into the composer when that chat opens.

    The text belongs to `chat_id` (None: the new chat) until another chat opens; the
    window calls `chat_opened()` whenever the open chat may have changed,
    and `flush()` before it closes.
    """

    def __init__(self, chat: ChatDoor, composer: Composer, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._chat = chat
        self.composer = composer
        self.chat_id: int | None = None
        self._putting_back = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SAVE_AFTER_MS)
        self._timer.timeout.connect(self.flush)
        composer.edit.textChanged.connect(self._typed)

    def _typed(self) -> None:
        if not self._putting_back:
            self._timer.start()

    def flush(self) -> None:
        """Save the text now, if it changed since the last save."""
        if self._timer.isActive() or self.sender() is self._timer:
            self._timer.stop()
            self._chat.save_draft(self.chat_id, self.composer.edit.toPlainText())

    def chat_opened(self) -> None:
        open_now = self._chat.conversation
        chat_id = open_now.id if open_now is not None else None
        if chat_id == self.chat_id:
            return
        if self.chat_id is None and chat_id is not None and not self._chat.messages:
            # The new chat was just saved (its settings changed, or its first message is
            # on the way): what is in the box stays, now as that chat's draft.
            self._timer.stop()
            text = self.composer.edit.toPlainText()
            self._chat.save_draft(None, "")
            self._chat.save_draft(chat_id, text)
            self.chat_id = chat_id
            return
        self.flush()
        self.chat_id = chat_id
        self._putting_back = True
        try:
            self.composer.edit.setPlainText(self._chat.draft_for(chat_id))
        finally:
            self._putting_back = False
        self.composer.edit.moveCursor(QTextCursor.MoveOperation.End)

    def put_back(self, chat_id: object, text: str) -> None:
        """A message that could not be saved returns to the box, if its chat is open and
        the box is empty (else it waits as the chat's draft, which the service kept)."""
        if chat_id == self.chat_id and not self.composer.edit.toPlainText().strip():
            self.composer.edit.setPlainText(text)
            self.composer.edit.moveCursor(QTextCursor.MoveOperation.End)
