"""The composer: Enter sends, Shift+Enter is a new line, Esc stops; Send turns into Stop."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget


class ComposerEdit(QPlainTextEdit):
    """A text box that sends on Enter."""

    submitted = Signal()
    stopRequested = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Override QPlainTextEdit.keyPressEvent.
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submitted.emit()
            return
        if event.key() == Qt.Key.Key_Escape:
            self.stopRequested.emit()
            return
        super().keyPressEvent(event)


class Composer(QWidget):
    """Where the user writes; knows whether an answer is streaming."""

    sendRequested = Signal(str)
    stopRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.edit = ComposerEdit(self)
        self.edit.setObjectName("composer")
        self.edit.setPlaceholderText("Message Kestrel (Enter sends, Shift+Enter for a new line)")
        self.edit.setAccessibleName("Message")
        self.edit.setTabChangesFocus(True)
        lines = self.edit.fontMetrics().lineSpacing()
        self.edit.setMinimumHeight(3 * lines)
        self.edit.setMaximumHeight(8 * lines)
        self.button = QPushButton("Send", self)
        self.button.setObjectName("send")
        self.button.setDefault(False)
        self.note = QLabel(self)
        self.note.setObjectName("composerNote")
        self.note.hide()
        row = QHBoxLayout()
        row.addWidget(self.edit, 1)
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignBottom)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 8)
        layout.addWidget(self.note)
        layout.addLayout(row)
        self._streaming = False
        self.edit.submitted.connect(self._send)
        self.edit.stopRequested.connect(self.stopRequested)
        self.button.clicked.connect(self._button_clicked)

    def set_streaming(self, streaming: bool) -> None:
        """While an answer streams the button stops it."""
        self._streaming = streaming
        self.button.setText("Stop" if streaming else "Send")
        self.button.setToolTip("Stop the answer (Esc)" if streaming else "Send (Enter)")

    def set_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def _button_clicked(self) -> None:
        if self._streaming:
            self.stopRequested.emit()
        else:
            self._send()

    def _send(self) -> None:
        text = self.edit.toPlainText()
        if self._streaming or not text.strip():
            return
        # The window clears the box once the session has accepted the message.
        self.sendRequested.emit(text)
