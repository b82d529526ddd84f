"""DraftKeeper: each chat's unsent text survives switching chats and restarting Kestrel."""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QTextCursor

from app.service.controller import ChatController
from app.ui.composer import Composer

# Typing saves the draft after this pause (the controller writes it off the UI thread).
SAVE_AFTER_MS = 600


class DraftKeeper(QObject):
    """Saves the composer's text as the draft of the chat it was typed in, and puts a
    chat's draft back into the composer when that chat opens.

    The text belongs to `chat_id` (None: the new chat) until another chat opens; the
    window calls `chat_opened()` whenever the controller's open chat may have changed,
    and `flush()` before it closes.
    """

    def __init__(self, controller: ChatController, composer: Composer, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
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
            self.controller.save_draft(self.chat_id, self.composer.edit.toPlainText())

    def chat_opened(self) -> None:
        open_now = self.controller.conversation
        chat_id = open_now.id if open_now is not None else None
        if chat_id == self.chat_id:
            return
        self.flush()
        self.chat_id = chat_id
        self._putting_back = True
        try:
            self.composer.edit.setPlainText(self.controller.draft_for(chat_id))
        finally:
            self._putting_back = False
        self.composer.edit.moveCursor(QTextCursor.MoveOperation.End)
