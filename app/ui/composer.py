"""The composer: a box that grows with its text, Enter sends, Shift+Enter is a new line, Esc stops.

The round button beside the text sends, and turns into Stop while the open chat's answer
is being written or waits its turn.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QKeyEvent, QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from app.ui import icons

# The box shows this many lines at most; longer text scrolls inside it.
MAX_LINES = 10
BUTTON_SIZE = 34


class ComposerEdit(QPlainTextEdit):
    """A text box that sends on Enter and is as tall as its text (up to MAX_LINES)."""

    submitted = Signal()
    stopRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    def lines(self) -> int:
        """Lines the text takes at the box's width (wrapped lines count)."""
        return max(1, int(self.document().documentLayout().documentSize().height()))

    def _fit(self, *_args: object) -> None:
        shown = min(self.lines(), MAX_LINES)
        margins = self.contentsMargins()
        height = (shown * self.fontMetrics().lineSpacing() + 2 * int(self.document().documentMargin())
                  + margins.top() + margins.bottom())
        if height != self.height():
            self.setFixedHeight(height)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded if self.lines() > MAX_LINES
                                        else Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def resizeEvent(self, event: QResizeEvent) -> None:  # Override: wrapping changes with the width.
        super().resizeEvent(event)
        self._fit()

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
    """Where the user writes; knows whether the open chat's answer is on its way.

    `note` is a line above the box for what the user should know before sending (a
    message waiting for another chat's answer).
    """

    sendRequested = Signal(str)
    stopRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.frame = QFrame(self)
        self.frame.setObjectName("composerFrame")
        self.edit = ComposerEdit(self.frame)
        self.edit.setObjectName("composer")
        self.edit.setPlaceholderText("Message Kestrel")
        self.edit.setToolTip("Enter sends · Shift+Enter starts a new line · Esc stops the answer")
        self.edit.setAccessibleName("Message")
        self.edit.setTabChangesFocus(True)
        self.button = QToolButton(self.frame)
        self.button.setObjectName("send")
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        self.button.setFixedSize(BUTTON_SIZE, BUTTON_SIZE)
        self.button.setIconSize(QSize(18, 18))
        self.note = QLabel(self)
        self.note.setObjectName("composerNote")
        self.note.setWordWrap(True)
        self.note.hide()
        row = QHBoxLayout(self.frame)
        row.setContentsMargins(10, 6, 6, 6)
        row.addWidget(self.edit, 1, Qt.AlignmentFlag.AlignVCenter)
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignBottom)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 12)
        layout.addWidget(self.note)
        layout.addWidget(self.frame)
        self._streaming = False
        self.set_streaming(False)
        self.edit.submitted.connect(self._send)
        self.edit.stopRequested.connect(self.stopRequested)
        self.edit.textChanged.connect(self._update_button)
        self.button.clicked.connect(self._button_clicked)

    def set_streaming(self, streaming: bool) -> None:
        """While the open chat's answer is on its way the button stops it."""
        self._streaming = streaming
        self.button.setText("Stop" if streaming else "Send")
        self.button.setAccessibleName(self.button.text())
        self.button.setToolTip("Stop the answer (Esc)" if streaming else "Send (Enter)")
        icons.themed(self.button, "stop" if streaming else "send", icons.ROLE.HighlightedText)
        self._update_button()

    def set_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def _update_button(self) -> None:
        self.button.setEnabled(self._streaming or bool(self.edit.toPlainText().strip()))

    def _button_clicked(self) -> None:
        if self._streaming:
            self.stopRequested.emit()
        else:
            self._send()

    def _send(self) -> None:
        text = self.edit.toPlainText()
        if self._streaming or not text.strip():
            return
        # The window clears the box once the controller has accepted the message.
        self.sendRequested.emit(text)
