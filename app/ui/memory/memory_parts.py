"""Parts of the Memory window: the memories table, the words for one memory, the memory settings."""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSize, Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QComboBox, QDialog, QDialogButtonBox, QFormLayout,
                               QHeaderView, QLabel, QPlainTextEdit, QSizePolicy, QStyledItemDelegate,
                               QStyleOptionViewItem, QTableView, QVBoxLayout, QWidget)

from app.core.memories import MAX_MEMORY_CHARS
from app.core.memory_settings import MemoryProposal, MemorySettings
from app.ui.common.text_room import elides_on_purpose
from app.ui.memory.memory_table import KEPT, ORIGIN, TEXT, MemoryTableModel

# Up to this many memories each row is as tall as its whole text (measured on every change: cheap for a
# few hundred); past it each is one line, elided, its tooltip whole, so 10,000 open at once.
WHOLE_ROWS = 300
EXAMPLE = "For example: My daughter is called Ada. I prefer short answers."
PROPOSALS = ((MemoryProposal.ASK, "Ask me first"), (MemoryProposal.AUTOMATIC, "Without asking (with Undo)"),
             (MemoryProposal.OFF, "Never"))
PROPOSE_TIP = ("After a chat, Kestrel asks the model which facts you told it about yourself and proposes them above "
               "the message box. Ask me first: kept only when you say Remember. Without asking: kept at once, with "
               "Undo. Never: the model is not asked, nor offered to remember when you ask it to. A model you ask "
               "to remember something always asks you first.")


class _RoomyRows(QStyledItemDelegate):
    """Cells with room above and below their text: wrapped memories read as paragraphs, not a wall."""

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:  # Override.
        size = super().sizeHint(option, index)
        return QSize(size.width(), size.height() + option.fontMetrics.height() // 2 + 4)


def memories_table(model: MemoryTableModel, parent: QWidget) -> QTableView:
    """A row per memory, a whole row selected at a time; the text takes the room, elided (its tooltip is whole)."""
    table = QTableView(parent)
    table.setObjectName("memoryTable")
    table.setModel(model)
    table.setItemDelegate(_RoomyRows(table))
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setWordWrap(False)
    table.setTabKeyNavigation(False)
    table.setAlternatingRowColors(True)
    table.setAccessibleName("Memories")
    elides_on_purpose(table, TEXT, ORIGIN)
    header = table.horizontalHeader()
    header.setSectionResizeMode(TEXT, QHeaderView.ResizeMode.Stretch)
    # Measured on the header and a sample, not on every row: 10,000 memories must open at once.
    width = table.fontMetrics().horizontalAdvance
    header.setSectionResizeMode(KEPT, QHeaderView.ResizeMode.Interactive)
    header.resizeSection(KEPT, width("30 Sep 2026, 23:59") + 24)
    header.setSectionResizeMode(ORIGIN, QHeaderView.ResizeMode.Interactive)
    header.resizeSection(ORIGIN, width("From a message in “A chat's title”") + 24)
    table.setMinimumHeight(table.verticalHeader().defaultSectionSize() * 4 + header.sizeHint().height()
                           + 2 * table.frameWidth())
    return table


def show_whole(table: QTableView, count: int) -> None:
    """Rows as tall as their memory's text while there are at most WHOLE_ROWS; one line each beyond."""
    whole = count <= WHOLE_ROWS
    table.setWordWrap(whole)
    table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents if whole
                                                else QHeaderView.ResizeMode.Fixed)


class MemoryTextDialog(QDialog):
    """One memory's words, to add or to change: OK while they fit (MAX_MEMORY_CHARS), the count beside."""

    def __init__(self, title: str, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.edit = QPlainTextEdit(text, self)
        self.edit.setObjectName("memoryText")
        self.edit.setPlaceholderText(EXAMPLE)
        self.edit.setTabChangesFocus(True)
        self.edit.setMinimumHeight(self.edit.fontMetrics().lineSpacing() * 4 + 16)
        label = QLabel("One short fact about you that Kestrel gives to new answers:", self)
        label.setWordWrap(True)
        label.setBuddy(self.edit)
        self.count = QLabel(self)
        self.count.setObjectName("memoryCount")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel,
                                        self)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(label)
        layout.addWidget(self.edit)
        layout.addWidget(self.count, 0, Qt.AlignmentFlag.AlignRight)
        layout.addWidget(self.buttons)
        self.edit.textChanged.connect(self._counted)
        self._counted()
        self.resize(max(self.sizeHint().width(), self.fontMetrics().horizontalAdvance(EXAMPLE) + 60),
                    self.sizeHint().height())

    def text(self) -> str:
        return self.edit.toPlainText()

    def _counted(self) -> None:
        length = len(" ".join(self.text().split()))
        over = length > MAX_MEMORY_CHARS
        self.count.setText(f"{length:,} of {MAX_MEMORY_CHARS:,} characters" + (": too long for one memory" if over
                                                                                else ""))
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(0 < length <= MAX_MEMORY_CHARS)


class MemorySettingsForm(QWidget):
    """The memory settings: used in chats, how Kestrel offers to remember, the API server's use; the one form
    for them, in the Memory window and on Settings' Memory page. `changed(MemorySettings)` when the person
    changes one (the Memory window saves it at once; Settings on OK, with `value()`)."""

    changed = Signal(object)

    def __init__(self, settings: MemorySettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._settings = settings
        self.enabled = QCheckBox("&Use my memories in chats", self)
        self.enabled.setToolTip("New answers are given the memories that matter to them (all of them while they "
                                "are few). A chat's own settings can leave memory out of that chat.")
        self.propose = QComboBox(self)
        self.propose.setToolTip(PROPOSE_TIP)
        self.api = QCheckBox("Let the &API server's answers use my memories", self)
        self.api.setToolTip("Off: requests from other programs are answered without your memories; they are "
                            "not you.")
        self.propose.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)  # a choice, not a text field
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow(self.enabled)
        form.addRow("&Offer to remember what you tell Kestrel", self.propose)
        form.addRow(self.api)
        self.show_settings(settings)
        self.enabled.toggled.connect(self._changed)
        self.propose.currentIndexChanged.connect(self._changed)
        self.api.toggled.connect(self._changed)

    def show_settings(self, settings: MemorySettings) -> None:
        """The settings as saved now (read again after a change anywhere); nothing is said back."""
        self._settings = settings
        for control in (self.enabled, self.propose, self.api):
            control.blockSignals(True)
        self.enabled.setChecked(settings.enabled)
        self.propose.clear()
        for value, words in PROPOSALS:
            self.propose.addItem(words, value.value)
        self.propose.setCurrentIndex(max(0, self.propose.findData(settings.propose.value)))
        self.api.setChecked(settings.api_uses_memory)
        self._follow_enabled()
        for control in (self.enabled, self.propose, self.api):
            control.blockSignals(False)

    def value(self) -> MemorySettings:
        return dataclasses.replace(self._settings, enabled=self.enabled.isChecked(),
                                   propose=MemoryProposal(self.propose.currentData()),
                                   api_uses_memory=self.api.isChecked())

    def _follow_enabled(self) -> None:
        on = self.enabled.isChecked()
        self.propose.setEnabled(on)
        self.api.setEnabled(on)

    def _changed(self) -> None:
        self._follow_enabled()
        self._settings = self.value()
        self.changed.emit(self._settings)
