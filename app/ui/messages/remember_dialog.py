"""RememberDialog: a message's text, edited down to one short fact, kept as a memory (the Remember action)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout,
                               QWidget)

from app.core.memories import MAX_MEMORY_CHARS, MemoryOrigin, MemoryRefused
from app.core.store.memories import AddedMemory
from app.core.store.history_errors import HistoryError
from app.service.doors.memory import MemoryDoor
from app.ui.common.warning_row import WarningRow

INTRO = ("Kestrel will remember this in your new chats, on this computer only. Keep one short fact, "
         "such as \u201cMy daughter is called Ada.\u201d")
OVER_COLOR = "#d08a00"  # the warning row's
# What the Remember button says while the door keeps the memory.
REMEMBERING = "Remembering\u2026"


class RememberDialog(QDialog):
    """Starts from a message's text (or the part of it selected) for the person to edit down to one fact;
    Remember keeps it through MemoryDoor.add (origin MESSAGE, the message's chat), off the UI thread.

    A refusal (MemoryRefused: empty, too long, too many) or a disk that refused (HistoryError) is said in
    the dialog in the door's words, with the text as typed: nothing is lost. It closes (accepted) once the
    memory is kept; `added` is then the AddedMemory (its `new` False: that fact was kept already). Closed
    while the door was asked, the memory is still kept (the press was the person's choice).
    """

    def __init__(self, text: str, conversation_id: int | None, door: MemoryDoor,
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Remember")
        self._conversation_id = conversation_id
        self._door = door
        self._spawn = spawn
        self.added: AddedMemory | None = None
        self._closed = False  # closed (Cancel, Escape) while the door kept it: nothing is left to tell
        self.finished.connect(self._finished)
        intro = QLabel(INTRO, self)
        intro.setWordWrap(True)
        self.editor = QPlainTextEdit(self)
        self.editor.setObjectName("rememberText")
        self.editor.setAccessibleName("What to remember")
        self.editor.setPlainText(text.strip())
        self.editor.moveCursor(QTextCursor.MoveOperation.End)
        self.editor.setTabChangesFocus(True)
        self.count = QLabel(self)
        self.count.setObjectName("rememberCount")
        self.count.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.problem = WarningRow("", self)
        self.problem.setObjectName("rememberProblem")
        self.problem.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.remember_button = QPushButton("Remember", self)
        self.remember_button.setDefault(True)
        buttons.addButton(self.remember_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.rejected.connect(self.reject)
        self.remember_button.clicked.connect(self.remember)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.editor, 1)
        layout.addWidget(self.count)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        self.editor.textChanged.connect(self._count)
        self._count()
        self.resize(460, 300)
        self.editor.setFocus()

    def _finished(self) -> None:
        self._closed = True

    def text(self) -> str:
        return self.editor.toPlainText()

    def _count(self) -> None:
        length = len(self.text().strip())
        self.count.setText(f"{length:,} of {MAX_MEMORY_CHARS:,} characters")
        # Over the limit, in the warning's colour: the person sees how far to cut before pressing Remember.
        self.count.setStyleSheet(f"color:{OVER_COLOR}" if length > MAX_MEMORY_CHARS else "")

    def remember(self) -> None:
        """Keep the text as typed (the door trims and checks it); the dialog waits for the answer."""
        self.remember_button.setEnabled(False)
        self.remember_button.setText(REMEMBERING)
        self._spawn(self._keep(self.text()))

    async def _keep(self, text: str) -> None:
        try:
            added = await self._door.add(text, MemoryOrigin.MESSAGE, self._conversation_id)
        except (MemoryRefused, HistoryError) as exc:
            if not self._closed:
                self._refused(str(exc))
            return
        self.added = added
        if not self._closed:
            self.accept()

    def _refused(self, words: str) -> None:
        self.problem.text.setText(words)
        self.problem.show()
        self.remember_button.setEnabled(True)
        self.remember_button.setText("Remember")
        self.editor.setFocus()
