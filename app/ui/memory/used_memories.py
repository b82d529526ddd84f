"""The memories one answer was given, shown when its "used N memories" is clicked."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QFrame, QLabel, QPushButton, QScrollArea, QVBoxLayout,
                               QWidget)

from app.core.memories import Memory
from app.ui.memory.memory_words import count_words, kept_words

# Wide enough to read a memory in a line or two, narrow enough to sit beside the chat.
_WIDTH_CHARS = 60


def forgotten_words(used: int, kept: int) -> str:
    """What is said of the memories an answer used that are forgotten since ("" when none is)."""
    gone = used - kept
    if gone <= 0:
        return ""
    if kept == 0:
        return ("The memories this answer used have been forgotten since." if used > 1 else
                "The memory this answer used has been forgotten since.")
    return f"{count_words(gone).capitalize()} it used {'has' if gone == 1 else 'have'} been forgotten since."


class UsedMemoriesPopup(QDialog):
    """A small window listing the memories an answer was given (those still kept), each with when it was kept.
    `manageRequested` opens the Memory window. `items` holds one label per memory shown."""

    manageRequested = Signal()

    def __init__(self, memories: Sequence[Memory], used: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Memories this answer used")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        intro = QLabel(f"This answer was given {count_words(used)} about you:" if memories else
                       "This answer was given memories about you.", self)
        intro.setWordWrap(True)
        listing = QWidget(self)
        rows = QVBoxLayout(listing)
        rows.setContentsMargins(0, 0, 0, 0)
        self.items: list[QLabel] = []
        for memory in memories:
            off = " · turned off since" if not memory.enabled else ""
            item = QLabel(f"• {memory.text}", listing)
            item.setWordWrap(True)
            item.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            item.setToolTip(f"Kept {kept_words(memory.created)}{off}")
            rows.addWidget(item)
            self.items.append(item)
        rows.addStretch(1)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(listing)
        self.forgotten = QLabel(forgotten_words(used, len(memories)), self)
        self.forgotten.setWordWrap(True)
        self.forgotten.setVisible(bool(self.forgotten.text()))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.close)
        self.manage = QPushButton("&Manage memories…", self)
        buttons.addButton(self.manage, QDialogButtonBox.ButtonRole.ActionRole)
        self.manage.clicked.connect(self._manage)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(scroll, 1)
        layout.addWidget(self.forgotten)
        layout.addWidget(buttons)
        width = self.fontMetrics().averageCharWidth() * _WIDTH_CHARS
        listing.setFixedWidth(width)  # wrapped labels are laid out to this width, so their height is known
        scroll.setMinimumWidth(width + scroll.verticalScrollBar().sizeHint().width())
        screen = self.screen().availableGeometry()
        scroll.setMinimumHeight(min(listing.sizeHint().height(), screen.height() // 2))

    def _manage(self) -> None:
        self.manageRequested.emit()
        self.close()
