"""The damaged-history panel: above the chat while the history file is damaged, with the two choices."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget


class DamagedHistoryPanel(QFrame):
    """Above the chat while the history file is damaged: what happened, and the two choices.

    Not a modal dialog: the model loads and chat goes on while it waits. After the
    choice it says where the damaged file was kept (and what was recovered) until
    dismissed. Signals: recoverRequested, freshRequested.
    """

    recoverRequested = Signal()
    freshRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("damagedHistory")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.text = QLabel(self)
        self.text.setWordWrap(True)
        # The path of the damaged file can be selected and copied.
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.recover_button = QPushButton("Recover what can be read", self)
        self.fresh_button = QPushButton("Start a fresh history", self)
        self.dismiss_button = QPushButton("Dismiss", self)
        self.recover_button.clicked.connect(self._recover)
        self.fresh_button.clicked.connect(self._fresh)
        self.dismiss_button.clicked.connect(self.hide)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for button in (self.recover_button, self.fresh_button, self.dismiss_button):
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addLayout(buttons)
        self.hide()

    def show_found(self, text: str) -> None:
        """The history is damaged: say so and offer the choices."""
        self.text.setText(text)
        self.set_working(False)
        self.recover_button.show()
        self.fresh_button.show()
        self.dismiss_button.hide()
        self.show()

    def show_done(self, text: str) -> None:
        """The choice was carried out: say where the damaged file is now."""
        self.text.setText(text)
        self.recover_button.hide()
        self.fresh_button.hide()
        self.dismiss_button.show()
        self.show()

    def set_working(self, working: bool) -> None:
        """While a choice is carried out, neither can be clicked again."""
        self.recover_button.setEnabled(not working)
        self.fresh_button.setEnabled(not working)

    def _recover(self) -> None:
        self.set_working(True)
        self.recoverRequested.emit()

    def _fresh(self) -> None:
        self.set_working(True)
        self.freshRequested.emit()
