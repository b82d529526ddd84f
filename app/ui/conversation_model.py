"""The conversation list: an item model over the history store, and its search filter."""

from __future__ import annotations

from datetime import datetime
from enum import IntEnum

from PySide6.QtCore import (QAbstractListModel, QModelIndex, QPersistentModelIndex,
                            QSortFilterProxyModel, Qt)

from app.core.conversation import Conversation
from app.core.history import HistoryStore


class ConversationRoles(IntEnum):
    """Item data roles; Qt.DisplayRole gives the title."""

    ID = Qt.ItemDataRole.UserRole + 1
    UPDATED = Qt.ItemDataRole.UserRole + 2


_Index = QModelIndex | QPersistentModelIndex


class ConversationListModel(QAbstractListModel):
    """Conversations newest first; renaming in place writes through to the store."""

    def __init__(self, store: HistoryStore, parent=None) -> None:
        super().__init__(parent)
        self._store = store
        self._items: list[Conversation] = []

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # Override QAbstractListModel.
        return 0 if parent.isValid() else len(self._items)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole):  # Override.
        if not index.isValid() or not 0 <= index.row() < len(self._items):
            return None
        item = self._items[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return item.title
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{item.title}\n{datetime.fromtimestamp(item.updated):%Y-%m-%d %H:%M}"
        if role == ConversationRoles.ID:
            return item.id
        if role == ConversationRoles.UPDATED:
            return item.updated
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:  # Override QAbstractListModel.flags.
        base = super().flags(index)
        return base | Qt.ItemFlag.ItemIsEditable if index.isValid() else base

    def setData(self, index: _Index, value, role: int = Qt.ItemDataRole.EditRole) -> bool:  # Override.
        title = str(value).strip()
        if role != Qt.ItemDataRole.EditRole or not index.isValid() or not title:
            return False
        item = self._items[index.row()]
        self._store.rename_conversation(item.id, title)
        self._items[index.row()] = self._store.get_conversation(item.id)
        self.dataChanged.emit(index, index, [Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole])
        return True

    def roleNames(self) -> dict[int, bytes]:  # Override QAbstractListModel.roleNames.
        return {int(Qt.ItemDataRole.DisplayRole): b"title", int(ConversationRoles.ID): b"id",
                int(ConversationRoles.UPDATED): b"updated"}

    def reload(self) -> None:
        self.beginResetModel()
        self._items = self._store.list_conversations()
        self.endResetModel()

    def row_of(self, conversation_id: int) -> int | None:
        return next((row for row, c in enumerate(self._items) if c.id == conversation_id), None)

    def touch(self, conversation_id: int) -> None:
        """A conversation changed: refresh it and move it to the top."""
        row = self.row_of(conversation_id)
        fresh = self._store.get_conversation(conversation_id)
        if row is None:
            self.beginInsertRows(QModelIndex(), 0, 0)
            self._items.insert(0, fresh)
            self.endInsertRows()
            return
        if row > 0:
            self.beginMoveRows(QModelIndex(), row, row, QModelIndex(), 0)
            self._items.insert(0, self._items.pop(row))
            self.endMoveRows()
        self._items[0] = fresh
        top = self.index(0)
        self.dataChanged.emit(top, top, [Qt.ItemDataRole.DisplayRole, ConversationRoles.UPDATED])

    def remove(self, conversation_id: int) -> None:
        row = self.row_of(conversation_id)
        if row is None:
            return
        self.beginRemoveRows(QModelIndex(), row, row)
        del self._items[row]
        self.endRemoveRows()


class ConversationFilter(QSortFilterProxyModel):
    """Shows the conversations whose title or messages match the search text."""

    def __init__(self, store: HistoryStore, parent=None) -> None:
        super().__init__(parent)
        self._store = store
        self._matches: set[int] | None = None

    def set_query(self, query: str) -> None:
        query = query.strip()
        self.beginFilterChange()
        self._matches = {c.id for c in self._store.search_conversations(query)} if query else None
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, row: int, parent: _Index) -> bool:  # Override QSortFilterProxyModel.
        if self._matches is None:
            return True
        index = self.sourceModel().index(row, 0, parent)
        return index.data(ConversationRoles.ID) in self._matches
