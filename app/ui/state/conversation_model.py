"""The conversation list as a Qt item model, fed by the service's events, and its search filter."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from enum import IntEnum

from PySide6.QtCore import (QAbstractListModel, QByteArray, QModelIndex, QObject, QPersistentModelIndex,
                            QSortFilterProxyModel, Qt, Signal)

from app.core.conversation import Conversation


class ConversationRoles(IntEnum):
    """Item data roles; Qt.DisplayRole gives the title."""

    ID = Qt.ItemDataRole.UserRole + 1
    UPDATED = Qt.ItemDataRole.UserRole + 2
    # An answer is being written for this chat (bool).
    ANSWERING = Qt.ItemDataRole.UserRole + 3
    # A message of this chat waits for another chat's answer to end (bool).
    WAITING = Qt.ItemDataRole.UserRole + 4
    # The chat has an unsent draft (bool).
    HAS_DRAFT = Qt.ItemDataRole.UserRole + 5
    # A tool call of this chat waits for the user's approval (bool).
    ASKING = Qt.ItemDataRole.UserRole + 6


_Index = QModelIndex | QPersistentModelIndex


class ConversationListModel(QAbstractListModel):
    """Conversations newest first.

    Renaming in place shows the new title at once and asks for it to be saved with
    renameRequested(conversation_id, title). Which chat is answered, which wait and
    which have a draft are kept by id (set_answers, set_drafted), so they survive the
    list being reordered or reset.
    """

    renameRequested = Signal(int, str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._items: list[Conversation] = []
        self._answering: int | None = None
        self._waiting: frozenset[int] = frozenset()
        self._drafted: set[int] = set()
        self._asking: set[int] = set()

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # Override QAbstractListModel.
        return 0 if parent.isValid() else len(self._items)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:  # Override.
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
        if role == ConversationRoles.ANSWERING:
            return item.id == self._answering
        if role == ConversationRoles.WAITING:
            return item.id in self._waiting
        if role == ConversationRoles.HAS_DRAFT:
            return item.id in self._drafted
        if role == ConversationRoles.ASKING:
            return item.id in self._asking
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:  # Override QAbstractListModel.flags.
        base = super().flags(index)
        return base | Qt.ItemFlag.ItemIsEditable if index.isValid() else base

    def setData(self, index: _Index, value: object, role: int = Qt.ItemDataRole.EditRole) -> bool:  # Override.
        title = str(value).strip()
        if role != Qt.ItemDataRole.EditRole or not index.isValid() or not title:
            return False
        item = self._items[index.row()]
        self._items[index.row()] = dataclasses.replace(item, title=title)
        self.dataChanged.emit(index, index, [Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole])
        self.renameRequested.emit(item.id, title)
        return True

    def roleNames(self) -> dict[int, QByteArray]:  # Override QAbstractListModel.roleNames.
        return {int(Qt.ItemDataRole.DisplayRole): QByteArray(b"title"), int(ConversationRoles.ID): QByteArray(b"id"),
                int(ConversationRoles.UPDATED): QByteArray(b"updated"),
                int(ConversationRoles.ANSWERING): QByteArray(b"answering"),
                int(ConversationRoles.WAITING): QByteArray(b"waiting"),
                int(ConversationRoles.HAS_DRAFT): QByteArray(b"hasDraft"),
                int(ConversationRoles.ASKING): QByteArray(b"asking")}

    def set_answers(self, answering: int | None, waiting: tuple[int, ...]) -> None:
        """The chat being answered and those waiting; only their rows are told, with only
        the roles that changed."""
        before_answering, before_waiting = self._answering, self._waiting
        self._answering, self._waiting = answering, frozenset(waiting)
        if before_answering != answering:
            self._tell({i for i in (before_answering, answering) if i is not None}, ConversationRoles.ANSWERING)
        self._tell(set(before_waiting ^ self._waiting), ConversationRoles.WAITING)

    def set_drafted(self, conversation_id: int, has_draft: bool) -> None:
        """A chat gained or lost its unsent draft."""
        if (conversation_id in self._drafted) != has_draft:
            (self._drafted.add if has_draft else self._drafted.discard)(conversation_id)
            self._tell({conversation_id}, ConversationRoles.HAS_DRAFT)

    def set_asking(self, conversation_ids: set[int]) -> None:
        """The chats with a tool call waiting for the user's approval."""
        changed, self._asking = self._asking ^ conversation_ids, set(conversation_ids)
        self._tell(changed, ConversationRoles.ASKING)

    def reset_drafted(self, drafted: frozenset[int]) -> None:
        """Every chat with a draft (at start-up, or after the history was replaced)."""
        changed = self._drafted ^ drafted
        self._drafted = set(drafted)
        self._tell(changed, ConversationRoles.HAS_DRAFT)

    def _tell(self, conversation_ids: set[int], role: ConversationRoles) -> None:
        for conversation_id in conversation_ids:
            row = self.row_of(conversation_id)
            if row is not None:
                index = self.index(row)
                self.dataChanged.emit(index, index, [role])

    def reset_to(self, conversations: tuple[Conversation, ...]) -> None:
        self.beginResetModel()
        self._items = list(conversations)
        self.endResetModel()

    def row_of(self, conversation_id: int) -> int | None:
        return next((row for row, c in enumerate(self._items) if c.id == conversation_id), None)

    def conversation(self, conversation_id: int) -> Conversation | None:
        row = self.row_of(conversation_id)
        return None if row is None else self._items[row]

    def update(self, fresh: Conversation, to_top: bool = True) -> None:
        """A conversation was created or changed: show it, at the top if to_top."""
        row = self.row_of(fresh.id)
        if row is not None and not to_top:
            self._items[row] = fresh
            index = self.index(row)
            self.dataChanged.emit(index, index, [Qt.ItemDataRole.DisplayRole, ConversationRoles.UPDATED])
            return
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
    """Shows only the conversations a search found (all of them when there is no search)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._matches: set[int] | None = None

    def set_matches(self, matches: set[int] | None) -> None:
        """The ids to show, or None for all."""
        self.beginFilterChange()
        self._matches = matches
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, row: int, parent: _Index) -> bool:  # Override QSortFilterProxyModel.
        if self._matches is None:
            return True
        index = self.sourceModel().index(row, 0, parent)
        return index.data(ConversationRoles.ID) in self._matches
