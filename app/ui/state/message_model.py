"""MessageListModel: the open conversation's messages as a Qt item model."""

from __future__ import annotations

import dataclasses
from enum import IntEnum

from PySide6.QtCore import QAbstractListModel, QByteArray, QModelIndex, QObject, QPersistentModelIndex, Qt

from app.core.chat_markdown import markdown_parts
from app.core.conversation import Message, MessageState, Part, Role
from app.ui.state.message_words import author_of, documents_said


class MessageRoles(IntEnum):
    """Item data roles; Qt.DisplayRole gives the plain text."""

    ROLE = Qt.ItemDataRole.UserRole + 1
    STATE = Qt.ItemDataRole.UserRole + 2
    STATS = Qt.ItemDataRole.UserRole + 3
    MESSAGE_ID = Qt.ItemDataRole.UserRole + 4
    OUT_OF_CONTEXT = Qt.ItemDataRole.UserRole + 5
    IS_LAST_ANSWER = Qt.ItemDataRole.UserRole + 6


_Index = QModelIndex | QPersistentModelIndex

# A long chat opens on its newest messages; older ones join as the user scrolls up to them.
# Laying a list view out asks Python about every row it has (about 8 µs a row; a hidden
# row still costs a third of that): 2,000 rows take 16 ms, the newest 200 of them 2 ms.
SHOWN_FIRST = 200
SHOWN_MORE = 200


class MessageListModel(QAbstractListModel):
    """Holds Message values; a growing answer changes only its own row.

    It holds the whole conversation, but its rows are the newest messages from `first`
    on: SHOWN_FIRST of them after reset_to, SHOWN_MORE more at each show_older().
    Message ids and messages() cover the whole conversation; rows only what is shown.
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._messages: list[Message] = []
        self._rows: dict[int, int] = {}  # message id -> position in _messages
        self._first = 0  # the position of row 0 in _messages
        self._context_starts_at = 0
        # A streaming answer's text (from TextGrew) said after its last tool parts begins here.
        self._tails: dict[int, int] = {}

    # --- Qt overrides ---------------------------------------------------------------

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # Override QAbstractListModel.
        return 0 if parent.isValid() else len(self._messages) - self._first

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:  # Override.
        if not index.isValid() or not 0 <= index.row() < self.rowCount():
            return None
        position = self._first + index.row()
        message = self._messages[position]
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
            return position < self._context_starts_at
        if role == MessageRoles.IS_LAST_ANSWER:
            return position == len(self._messages) - 1 and message.role == Role.ASSISTANT
        if role == Qt.ItemDataRole.AccessibleTextRole:
            # An answer that used tools is heard with its calls and results, as it is seen.
            said = "\n".join(markdown_parts(message.parts)) if message.parts else message.text
            return f"{author_of(message)}: {said}{documents_said(message)}"
        if role == Qt.ItemDataRole.AccessibleDescriptionRole:
            # The icons under a message are painted, so a screen reader hears their keys here.
            keys = ["Ctrl+C copies it", "Enter selects its text"]
            if message.role == Role.USER:
                keys.append("F2 edits and resends it")
            elif position == len(self._messages) - 1:
                keys.append("Ctrl+R writes it again")
            return "; ".join(keys) + "; the menu key lists these."
        return None

    def roleNames(self) -> dict[int, QByteArray]:  # Override QAbstractListModel.roleNames.
        names = {int(r): QByteArray(r.name.lower().encode()) for r in MessageRoles}
        names[int(Qt.ItemDataRole.DisplayRole)] = QByteArray(b"text")
        return names

    # --- changes --------------------------------------------------------------------

    def reset_to(self, messages: list[Message]) -> None:
        self.beginResetModel()
        self._messages = list(messages)
        self._first = max(0, len(self._messages) - SHOWN_FIRST)
        self._reindex()
        self._context_starts_at = _context_start(self._messages)
        self.endResetModel()

    def show_older(self) -> int:
        """Older messages join the rows, above the others; returns how many (0: all shown)."""
        more = min(SHOWN_MORE, self._first)
        if more:
            self.beginInsertRows(QModelIndex(), 0, more - 1)
            self._first -= more
            self.endInsertRows()
        return more

    def append(self, message: Message) -> None:
        row = self.rowCount()
        self.beginInsertRows(QModelIndex(), row, row)
        self._messages.append(message)
        self._rows[message.id] = len(self._messages) - 1
        self.endInsertRows()
        if row > 0:
            # The previous last row may stop being "the last answer".
            before = self.index(row - 1)
            self.dataChanged.emit(before, before, [MessageRoles.IS_LAST_ANSWER])

    def append_text(self, message_id: int, more: str, thinking: bool = False) -> None:
        """A growing answer's new text, or new thinking before it (one frame's worth of deltas).

        Both are told as a DisplayRole change: the view draws either on its frame clock.
        """
        position = self._rows.get(message_id)
        if position is None:
            return
        message = self._messages[position]
        grown = (dataclasses.replace(message, thinking=message.thinking + more) if thinking
                 else dataclasses.replace(message, text=message.text + more))
        self._change(grown, [Qt.ItemDataRole.DisplayRole])

    def set_parts(self, message_id: int, parts: tuple[Part, ...]) -> None:
        """A streaming answer's tool calls and results so far; the text it writes next comes after them."""
        position = self._rows.get(message_id)
        if position is None:
            return
        message = self._messages[position]
        self._tails[message_id] = len(message.text)
        self._change(dataclasses.replace(message, parts=parts), [Qt.ItemDataRole.DisplayRole])

    def tail_from(self, message_id: int) -> int:
        """Where a streaming answer's text after its parts starts (0: it has no parts yet)."""
        return self._tails.get(message_id, 0)

    def replace(self, message: Message) -> None:
        """A message's final form (state and stats too)."""
        position = self._rows.get(message.id)
        if position is None:
            return
        self._tails.pop(message.id, None)
        self._messages[position] = message
        if position >= self._first:
            index = self.index(position - self._first)
            self.dataChanged.emit(index, index,
                                  [Qt.ItemDataRole.DisplayRole, MessageRoles.STATE, MessageRoles.STATS])
        self._update_context_start()

    def remove_from(self, message_id: int) -> None:
        """Drop that message and all after it (regenerate, edit and resend)."""
        position = self._rows.get(message_id)
        if position is None:
            return
        if position < self._first:
            # Cut above what is shown (not something the window offers): show from the start.
            self.beginResetModel()
            del self._messages[position:]
            self._first = 0
            self._reindex()
            self.endResetModel()
            return
        row = position - self._first
        self.beginRemoveRows(QModelIndex(), row, self.rowCount() - 1)
        del self._messages[position:]
        self._reindex()
        self.endRemoveRows()
        if row > 0:
            last = self.index(row - 1)
            self.dataChanged.emit(last, last, [MessageRoles.IS_LAST_ANSWER])

    # --- lookups --------------------------------------------------------------------

    def message(self, row: int) -> Message:
        """The message on a row (of those shown)."""
        return self._messages[self._first + row]

    def row_of(self, message_id: int) -> int | None:
        """The row of a message, None if it is not in the chat or not shown yet."""
        position = self._rows.get(message_id)
        return None if position is None or position < self._first else position - self._first

    def messages(self) -> list[Message]:
        """The whole conversation, shown or not."""
        return list(self._messages)

    def starts_context(self, row: int) -> bool:
        """Whether the row is the first message the model saw in the latest answer, with
        earlier ones left out."""
        position = self._first + row
        return 0 < position == self._context_starts_at

    def _change(self, message: Message, roles: list[int]) -> None:
        position = self._rows.get(message.id)
        if position is None:
            return
        self._messages[position] = message
        if position >= self._first:
            index = self.index(position - self._first)
            self.dataChanged.emit(index, index, roles)

    def _reindex(self) -> None:
        self._rows = {m.id: row for row, m in enumerate(self._messages)}

    def _update_context_start(self) -> None:
        start = _context_start(self._messages)
        if start != self._context_starts_at:
            old, self._context_starts_at = self._context_starts_at, start
            last = max(old, start) - self._first
            if last > 0 and self.rowCount():
                self.dataChanged.emit(self.index(0), self.index(min(last, self.rowCount() - 1)),
                                      [MessageRoles.OUT_OF_CONTEXT])


def _context_start(messages: list[Message]) -> int:
    """The first row the model saw in the latest answer (earlier rows were left out)."""
    for row in range(len(messages) - 1, -1, -1):
        message = messages[row]
        stats = message.stats
        if message.role == Role.ASSISTANT and message.state != MessageState.STREAMING and stats is not None:
            left_out = stats.messages_left_out
            turns = [r for r, m in enumerate(messages[:row]) if m.role != Role.SYSTEM]
            return turns[left_out] if 0 < left_out < len(turns) else 0
    return 0
