"""The listening bar above the message box: the open-microphone dot, what dictation is doing, the live level and the words so far."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from app.ui.common import icons
from app.ui.voice.level_meter import LevelMeter, RecordingDot


class DictationBar(QWidget):
    """Shown from the press until dictation ends, and after an end that went wrong (with its words, until
    closed or the next press); in voice mode, the whole time it is on. `dot` is on exactly while the
    microphone is open; `status` says what dictation (or voice mode) is doing; `meter` moves with the
    voice; `words` holds what was recognised so far. `close_button` closes a problem, or ends voice mode."""

    closeRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("dictationBar")
        self.dot = RecordingDot(self)
        self.status = QLabel(self)
        self.status.setObjectName("dictationStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.meter = LevelMeter(self)
        self.close_button = QToolButton(self)
        self.close_button.setObjectName("dictationClose")
        self.close_button.setAutoRaise(True)
        self._close_words("Close", "Close this message")
        self.close_button.setIconSize(QSize(14, 14))
        icons.themed(self.close_button, "close")
        self.close_button.clicked.connect(self.closeRequested)
        self.words = QLabel(self)
        self.words.setObjectName("dictationWords")
        self.words.setWordWrap(True)
        self.words.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.setSpacing(8)
        top.addWidget(self.dot, 0, Qt.AlignmentFlag.AlignVCenter)
        top.addWidget(self.status, 1)
        top.addWidget(self.meter, 0, Qt.AlignmentFlag.AlignVCenter)
        top.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        column = QVBoxLayout(self)
        column.setContentsMargins(6, 2, 2, 2)
        column.setSpacing(2)
        column.addLayout(top)
        column.addWidget(self.words)
        self.hide()

    def show_working(self, status: str, *, microphone_open: bool) -> None:
        """Dictation is on: status words, the dot and the meter while the microphone is open."""
        self.status.setText(status)
        self.dot.setVisible(microphone_open)
        self.meter.setVisible(microphone_open)
        if not microphone_open:
            self.meter.set_level(None)
        self.close_button.hide()
        self.show()

    def show_voice_mode(self, status: str, *, microphone_open: bool, close_tip: str) -> None:
        """Voice mode is on: its line, the dot and the meter while the microphone is open, and a close
        button that ends it (close_tip: how else to end it)."""
        self.show_working(status, microphone_open=microphone_open)
        self._close_words("End voice mode", close_tip)
        self.close_button.show()

    def show_words(self, text: str) -> None:
        self.words.setText(text)
        self.words.setVisible(bool(text))

    def show_problem(self, text: str) -> None:
        """Dictation ended badly (or could not start): its words stay until closed."""
        self.status.setText(text)
        self.dot.hide()
        self.meter.hide()
        self.meter.set_level(None)
        self.words.clear()
        self.words.hide()
        self._close_words("Close", "Close this message")
        self.close_button.show()
        self.show()

    def clear(self) -> None:
        self.words.clear()
        self.words.hide()
        self.meter.set_level(None)
        self.hide()

    def _close_words(self, name: str, tip: str) -> None:
        self.close_button.setAccessibleName(name)
        self.close_button.setToolTip(tip)
