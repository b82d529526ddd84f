"""A warning icon beside wrapped words: what the user should think twice about, in any form."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from app.ui.common import icons


class WarningRow(QWidget):
    """A warning icon beside wrapped words, for what the user should think twice about."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("serverWarning")
        mark = QLabel(self)
        mark.setPixmap(icons.icon("warning", color="#d08a00").pixmap(20, 20))
        self.text = QLabel(text, self)
        self.text.setWordWrap(True)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(mark, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.text, 1)
