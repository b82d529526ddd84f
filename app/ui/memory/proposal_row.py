"""The row above the composer where Kestrel proposes a memory after a chat (Remember / Edit… / Not now), or says it kept one (Undo)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QDialog, QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.service.memory_events import ProposedMemory
from app.ui.memory.memory_parts import MemoryTextDialog
from app.ui.memory.memory_words import kept_notice, proposal_question

# A notice of a memory kept without asking goes away by itself after this long: it only informs (Undo
# stays possible on the Memory page).
NOTICE_MS = 30_000


class MemoryProposalRow(QFrame):
    """Not modal: the chat goes on while it waits. One proposal at a time, the oldest first (`pending`:
    those not yet answered, the shown one first); a kept one (automatic) shows as a notice with Undo.

    Signals: accepted(proposal id, text or None: its own words), declined(proposal id), undone(memory id).
    `ask_text` is the Edit… dialog (tests replace it). `question` is the words shown, `more` the chat it came
    from (`chat_title`, given by the window: None for one gone since) and how many more wait.
    """

    accepted = Signal(int, object)
    declined = Signal(int)
    undone = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("memoryProposal")
        self.setAccessibleName("Kestrel proposes to remember something")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)
        self.setBackgroundRole(QPalette.ColorRole.AlternateBase)  # apart from the page, in either theme
        self.pending: list[ProposedMemory] = []
        self.chat_title: Callable[[int], str | None] = lambda conversation_id: None
        self.shown: ProposedMemory | None = None
        self.question = QLabel(self)
        self.question.setObjectName("memoryProposalText")
        self.question.setWordWrap(True)
        self.question.setTextFormat(Qt.TextFormat.PlainText)
        self.more = QLabel(self)
        self.more.setObjectName("memoryProposalMore")
        self.more.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.more.setWordWrap(True)  # a long chat title wraps rather than push the buttons out
        self.more.setTextFormat(Qt.TextFormat.PlainText)
        self.remember = self._button("&Remember", "Keep this fact; new chats are given it", self._accept)
        self.edit = self._button("E&dit…", "Change the words, then keep it", self._edit)
        self.not_now = self._button("&Not now", "Keep nothing; it is not proposed again", self._decline)
        self.undo = self._button("&Undo", "Forget it again", self._undo)
        self.dismiss = self._button("OK", "Hide this note", self._next)
        self.remember.setDefault(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.more, 1)
        for button in (self.remember, self.edit, self.not_now, self.undo, self.dismiss):
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.addWidget(self.question)
        layout.addLayout(buttons)
        self._notice_timer = QTimer(self)
        self._notice_timer.setSingleShot(True)
        self._notice_timer.setInterval(NOTICE_MS)
        self._notice_timer.timeout.connect(self._notice_over)
        self.hide()

    def _button(self, text: str, tip: str, slot: Callable[[], None]) -> QPushButton:
        button = QPushButton(text, self)
        button.setAccessibleDescription(tip)
        button.setToolTip(tip)
        button.clicked.connect(slot)
        return button

    # --- what the service said ------------------------------------------------------------

    def add(self, proposal: ProposedMemory) -> None:
        """A proposal (or a kept fact's notice) joins those waiting; shown at once if none is."""
        if all(waiting.id != proposal.id for waiting in self.pending):
            self.pending.append(proposal)
        if self.shown is None:
            self._show_first()
        else:
            self._say_more()

    def settle(self, proposal_id: int) -> None:
        """A proposal was answered (here or elsewhere): it goes, the next shows."""
        self.pending = [waiting for waiting in self.pending if waiting.id != proposal_id]
        if self.shown is not None and self.shown.id == proposal_id:
            self.shown = None
            self._show_first()
        else:
            self._say_more()

    def _show_first(self) -> None:
        self._notice_timer.stop()
        self.shown = self.pending[0] if self.pending else None
        if self.shown is None:
            self.hide()
            return
        kept = self.shown.kept is not None
        self.question.setText(kept_notice(self.shown.text) if kept else proposal_question(self.shown.text))
        for button in (self.remember, self.edit, self.not_now):
            button.setVisible(not kept)
        for button in (self.undo, self.dismiss):
            button.setVisible(kept)
        self._say_more()
        self.show()
        if kept:
            self._notice_timer.start()

    def _say_more(self) -> None:
        said = []
        title = self.chat_title(self.shown.conversation_id) if self.shown is not None else None
        if title:
            said.append(f"From “{title}”")
        waiting = len(self.pending) - (1 if self.shown is not None else 0)
        if waiting > 0:
            said.append(f"{waiting} more after this")
        self.more.setText(" · ".join(said))

    # --- the person's answer ------------------------------------------------------------------

    def ask_text(self, text: str) -> str | None:
        dialog = MemoryTextDialog("Remember", text, self)
        return dialog.text() if dialog.exec() == QDialog.DialogCode.Accepted else None

    def _accept(self) -> None:
        if self.shown is not None and self.shown.kept is None:
            self.accepted.emit(self.shown.id, None)

    def _edit(self) -> None:
        shown = self.shown
        if shown is None or shown.kept is not None:
            return
        text = self.ask_text(shown.text)
        if text is not None and self.shown is shown:  # still the one asked about (not answered elsewhere)
            self.accepted.emit(shown.id, text)

    def _decline(self) -> None:
        if self.shown is not None and self.shown.kept is None:
            self.declined.emit(self.shown.id)

    def _undo(self) -> None:
        shown = self.shown
        if shown is not None and shown.kept is not None:
            self.undone.emit(shown.kept.id)
            self.settle(shown.id)

    def _next(self) -> None:
        if self.shown is not None:
            self.settle(self.shown.id)

    def _notice_over(self) -> None:
        if self.shown is not None and self.shown.kept is not None:
            self._next()
