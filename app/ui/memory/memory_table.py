"""MemoryTableModel: the person's memories as rows (the text, ticked while it is used; when kept; where from)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from app.core.memories import Memory
from app.service.memory_events import MemoriesChanged
from app.ui.memory.memory_words import kept_words, origin_words

_Index = QModelIndex | QPersistentModelIndex
HEADERS = ("Memory", "Kept", "From")
TEXT, KEPT, ORIGIN = range(3)
MEMORY_ROLE = Qt.ItemDataRole.UserRole + 1  # the row's Memory value


class MemoryTableModel(QAbstractTableModel):
    """One row per memory, oldest first, as MemoryDoor.listing gives them. The first column's check is
    whether the memory is used (turning it off keeps it); `toggled(memory id, on)` is called when the
    person ticks or unticks it (the window asks the service; the row changes when MemoriesChanged says so).
    `chat_title(conversation id)` names the chat a memory came from (None: not in the list)."""

    def __init__(self, chat_title: Callable[[int], str | None], toggled: Callable[[int, bool], None]) -> None:
        super().__init__()
        self._memories: list[Memory] = []
        self._chat_title = chat_title
        self._toggled = toggled

    def reset_to(self, memories: Sequence[Memory]) -> None:
        self.beginResetModel()
        self._memories = list(memories)
        self.endResetModel()

    def apply(self, change: MemoriesChanged) -> bool:
        """Follow a change; False when the list must be read again (MemoriesChanged.everything)."""
        if change.everything:
            return False
        gone = set(change.removed)
        for row in reversed(range(len(self._memories))):
            if self._memories[row].id in gone:
                self.beginRemoveRows(QModelIndex(), row, row)
                del self._memories[row]
                self.endRemoveRows()
        for memory in change.changed:
            found = self.row_of(memory.id)
            if found is None:
                self.beginInsertRows(QModelIndex(), len(self._memories), len(self._memories))
                self._memories.append(memory)
                self.endInsertRows()
            else:
                self._memories[found] = memory
                self.dataChanged.emit(self.index(found, 0), self.index(found, len(HEADERS) - 1))
        return True

    def chats_renamed(self) -> None:
        """The chats' titles may have changed: the From column is read again."""
        if self._memories:
            self.dataChanged.emit(self.index(0, ORIGIN), self.index(len(self._memories) - 1, ORIGIN),
                                  [Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole])

    def memories(self) -> list[Memory]:
        return list(self._memories)

    def memory(self, row: int) -> Memory:
        return self._memories[row]

    def row_of(self, memory_id: int) -> int | None:
        return next((row for row, memory in enumerate(self._memories) if memory.id == memory_id), None)

    # --- QAbstractTableModel ------------------------------------------------------------------

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # Override QAbstractTableModel.rowCount.
        return 0 if parent.isValid() else len(self._memories)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # Override QAbstractTableModel.columnCount.
        return 0 if parent.isValid() else len(HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation,  # Override QAbstractTableModel.headerData.
                   role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return HEADERS[section]
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:  # Override QAbstractTableModel.flags.
        flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        return flags | Qt.ItemFlag.ItemIsUserCheckable if index.column() == TEXT else flags

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:  # Override.
        if not index.isValid() or index.row() >= len(self._memories):
            return None
        memory = self._memories[index.row()]
        column = index.column()
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return self._words(memory, column, role == Qt.ItemDataRole.ToolTipRole)
        if role == Qt.ItemDataRole.CheckStateRole and column == TEXT:
            return Qt.CheckState.Checked if memory.enabled else Qt.CheckState.Unchecked
        if role == Qt.ItemDataRole.ForegroundRole and not memory.enabled:
            return QApplication.palette().color(QPalette.ColorRole.PlaceholderText)  # kept, not used: greyed
        if role == MEMORY_ROLE:
            return memory
        return None

    def _words(self, memory: Memory, column: int, tip: bool) -> str:
        if column == TEXT:
            off = "\n\nTurned off: kept, but not given to answers. Tick it to use it again."
            return memory.text + (off if tip and not memory.enabled else "")
        if column == KEPT:
            return kept_words(memory.created)
        title = self._chat_title(memory.conversation_id) if memory.conversation_id is not None else None
        return origin_words(memory, title)

    def setData(self, index: _Index, value: object, role: int = Qt.ItemDataRole.EditRole) -> bool:  # Override.
        if role != Qt.ItemDataRole.CheckStateRole or index.column() != TEXT or not index.isValid():
            return False
        on = Qt.CheckState(value) == Qt.CheckState.Checked if isinstance(value, (int, Qt.CheckState)) else bool(value)
        self._toggled(self._memories[index.row()].id, on)
        return False  # shown once the service says it changed
