"""MessageListModel: the open conversation's messages as a Qt item model."""

from __future__ import annotations

import dataclasses
from enum import IntEnum

from PySide6.QtCore import QAbstractListModel, QByteArray, QModelIndex, QPersistentModelIndex, Qt

from app.core.conversation import Message, MessageState, Role


class MessageRoles(IntEnum):
    """Item data roles; Qt.DisplayRole gives the plain text."""

    ROLE = Qt.ItemDataRole.UserRole + 1
    STATE = Qt.ItemDataRole.UserRole + 2
    STATS = Qt.ItemDataRole.UserRole + 3
    MESSAGE_ID = Qt.ItemDataRole.UserRole + 4
    OUT_OF_CONTEXT = Qt.ItemDataRole.UserRole + 5
    IS_LAST_ANSWER = Qt.ItemDataRole.UserRole + 6


_Index = QModelIndex | QPersistentModelIndex


class MessageListModel(QAbstractListModel):
    """Holds Message values; a growing answer changes only its own row."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._messages: list[Message] = []
        self._rows: dict[int, int] = {}
        self._context_starts_at = 0

    # --- Qt overrides ---------------------------------------------------------------

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # Override QAbstractListModel.
        return 0 if parent.isValid() else len(self._messages)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole):  # Override.
        if not index.isValid() or not 0 <= index.row() < len(self._messages):
            return None
        message = self._messages[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return message.text
        if role == MessageRoles.ROLE:
            return message.role.value
        if role == MessageRoles.STATE:
            return message.state.value
        if role == MessageRoles.STATS:
            return message.stats
        if role == MessageRoles.MESSAGE_ID:
            return message.id
        if role == MessageRoles.OUT_OF_CONTEXT:
            return index.row() < self._context_starts_at
        if role == MessageRoles.IS_LAST_ANSWER:
            return index.row() == len(self._messages) - 1 and message.role == Role.ASSISTANT
        if role == Qt.ItemDataRole.AccessibleTextRole:
            who = "You" if message.role == Role.USER else "Kestrel"
            return f"{who}: {message.text}"
        return None

    def roleNames(self) -> dict[int, QByteArray]:  # Override QAbstractListModel.roleNames.
        names = {int(r): QByteArray(r.name.lower().encode()) for r in MessageRoles}
        names[int(Qt.ItemDataRole.DisplayRole)] = QByteArray(b"text")
        return names

    # --- changes --------------------------------------------------------------------

    def reset_to(self, messages: list[Message]) -> None:
        self.beginResetModel()
        self._messages = list(messages)
        self._reindex()
        self._context_starts_at = _context_start(self._messages)
        self.endResetModel()

    def append(self, message: Message) -> None:
        row = len(self._messages)
        self.beginInsertRows(QModelIndex(), row, row)
        self._messages.append(message)
        self._rows[message.id] = row
        self.endInsertRows()
        if row > 0:
            # The previous last row may stop being "the last answer".
            before = self.index(row - 1)
            self.dataChanged.emit(before, before, [MessageRoles.IS_LAST_ANSWER])

    def append_text(self, message_id: int, more: str) -> None:
        """A growing answer's new text (one frame's worth of deltas)."""
        row = self._rows.get(message_id)
        if row is not None:
            self._change(message_id, [Qt.ItemDataRole.DisplayRole], text=self._messages[row].text + more)

    def replace(self, message: Message) -> None:
        """A message's final form (state and stats too)."""
        row = self._rows.get(message.id)
        if row is None:
            return
        self._messages[row] = message
        index = self.index(row)
        self.dataChanged.emit(index, index, [Qt.ItemDataRole.DisplayRole, MessageRoles.STATE, MessageRoles.STATS])
        self._update_context_start()

    def remove_from(self, message_id: int) -> None:
        """Drop that message and all after it (regenerate, edit and resend)."""
        row = self._rows.get(message_id)
        if row is None:
            return
        self.beginRemoveRows(QModelIndex(), row, len(self._messages) - 1)
        del self._messages[row:]
        self._reindex()
        self.endRemoveRows()
        if row > 0:
            last = self.index(row - 1)
            self.dataChanged.emit(last, last, [MessageRoles.IS_LAST_ANSWER])

    # --- lookups --------------------------------------------------------------------

    def message(self, row: int) -> Message:
        return self._messages[row]

    def row_of(self, message_id: int) -> int | None:
        return self._rows.get(message_id)

    def messages(self) -> list[Message]:
        return list(self._messages)

    @property
    def context_starts_at(self) -> int:
        return self._context_starts_at

    def _change(self, message_id: int, roles: list, **changes) -> None:
        row = self._rows.get(message_id)
        if row is None:
            return
        self._messages[row] = dataclasses.replace(self._messages[row], **changes)
        index = self.index(row)
        self.dataChanged.emit(index, index, roles)

    def _reindex(self) -> None:
        self._rows = {m.id: row for row, m in enumerate(self._messages)}

    def _update_context_start(self) -> None:
        start = _context_start(self._messages)
        if start != self._context_starts_at:
            old, self._context_starts_at = self._context_starts_at, start
            last = max(old, start)
            if last > 0 and self._messages:
                self.dataChanged.emit(self.index(0), self.index(min(last, len(self._messages) - 1)),
                                      [MessageRoles.OUT_OF_CONTEXT])


def _context_start(messages: list[Message]) -> int:
    """The first row the model saw in the latest answer (earlier rows were left out)."""
    for row in range(len(messages) - 1, -1, -1):
        message = messages[row]
        if message.role == Role.ASSISTANT and message.state != MessageState.STREAMING and message.stats:
            left_out = int(message.stats.get("messages_left_out", 0) or 0)
            turns = [r for r, m in enumerate(messages[:row]) if m.role != Role.SYSTEM]
            return turns[left_out] if 0 < left_out < len(turns) else 0
    return 0
