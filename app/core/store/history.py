"""The chat history: conversations and messages in one SQLite file."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from app.core.answer_stats import AnswerStats
from app.core.attachment_data import attachments_json, checked_collections, collections_json, sources_json
from app.core.attachments import AttachedFile, AttachedImage, SourceRef
from app.core.conversation import UNTITLED, Conversation, Message, MessageState, Part, Role
from app.core.generation import GenerationSettings
from app.core.store.history_errors import HistoryDamaged, HistoryError, check_damage, damaged
from app.core.store.history_file import HistoryFile
from app.core.store.history_images import images_for, store_images, with_images
from app.core.store.history_rows import (
    MESSAGE_COLUMNS,
    attachments_for,
    conversation_from_row,
    fts5_phrase,
    inserted_id,
    message_fold,
    message_from_row,
    parts_for,
    sources_for,
    stats_json,
)
from app.core.store.history_schema import SQLITE_CONSTRAINT_FOREIGNKEY, error_code, search_fold
from app.core.message_parts import checked_parts, parts_json

# The errors live in history_errors.py (with the check for a damaged file) and the file's
# set-up in history_file.py; callers take them from here, with the store that raises them.
__all__ = ["HistoryDamaged", "HistoryError", "HistoryStore", "check_damage", "damaged"]

# Two ways to find the conversations `c` with a message whose folded text holds :q.
# The index lists the messages that hold :phrase; each then costs a lookup of its row.
_CONTAINING_VIA_INDEX = (
    "c.id IN (SELECT m.conversation_id FROM messages AS m WHERE m.id IN"
    " (SELECT rowid FROM message_search WHERE message_search MATCH :phrase))"
)
# The scan reads each conversation's messages up to its first match: plain SQL over
# the folded copies, with no Python call per message. It serves where the trigram
# index cannot (a query under 3 characters) and where it costs less: a query found in
# very many messages, where most conversations match within their first few.
_CONTAINING_VIA_SCAN = (
    "EXISTS (SELECT 1 FROM messages AS m WHERE m.conversation_id = c.id"
    " AND instr(m.folded, :q) > 0)"
)
# Past this many messages found, the scan is the faster: the two cost about the same
# (30-50 ms) around 3,000 on the history benchmarks/search.py builds (100,000
# messages in 400 chats). Counting stops here, so a common word's count is cheap.
_INDEX_HITS_MAX = 3_000


class HistoryStore(HistoryFile):
    """Conversations and their messages, kept in a SQLite database at `path`.

    Every public method commits before it returns. Use it from one thread at a time;
    `check_same_thread=False` lets the thread that closes it differ from the one that
    opened it, as sqlite3.connect allows.
    """

    # Conversations

    def create_conversation(
        self,
        title: str = UNTITLED,
        system_prompt: str = "",
        settings: GenerationSettings | None = None,
        model: str | None = None,
        collections: Sequence[str] = (),
    ) -> Conversation:
        """Start a new, empty conversation and return it (collections: as set_collections)."""
        settings = (settings or GenerationSettings()).validated()
        names = checked_collections(collections)
        now = self._clock()
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO conversations"
                " (title, created, updated, system_prompt, settings, model, collections)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (title, now, now, system_prompt, json.dumps(settings.to_dict()), model, collections_json(names)),
            )
        return self.get_conversation(inserted_id(cursor))

    def get_conversation(self, conversation_id: int) -> Conversation:
        """The conversation with this id; KeyError if there is none."""
        with self._translate_errors():
            row = self._conn.execute(
                "SELECT * FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
        if row is None:
            raise KeyError(conversation_id)
        return conversation_from_row(row)

    def list_conversations(self) -> list[Conversation]:
        """All conversations, the most recently updated first."""
        with self._translate_errors():
            rows = self._conn.execute(
                "SELECT * FROM conversations ORDER BY updated DESC, id DESC"
            ).fetchall()
        return [conversation_from_row(row) for row in rows]

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        """Give a conversation a new title (its place in the list stays: no activity)."""
        self._update_conversation(conversation_id, {"title": title}, touch=False)

    def update_conversation(
        self,
        conversation_id: int,
        *,
        system_prompt: str | None = None,
        settings: GenerationSettings | None = None,
        model: str | None = None,
    ) -> None:
        """Change the given fields of a conversation; fields left as None stay."""
        changes: dict[str, Any] = {}
        if system_prompt is not None:
            changes["system_prompt"] = system_prompt
        if settings is not None:
            changes["settings"] = json.dumps(settings.validated().to_dict())
        if model is not None:
            changes["model"] = model
        self._update_conversation(conversation_id, changes)

    def choose_model(self, conversation_id: int, model: str | None) -> None:
        """The model this chat answers with (None: the default model); no activity."""
        self._update_conversation(conversation_id, {"model": model}, touch=False)

    def set_collections(self, conversation_id: int, names: Sequence[str]) -> None:
        """The document collections (their names) this chat answers from, replacing the ones it
        had; () for none. No activity: the chat keeps its place in the list. KeyError if there is
        no such chat; ValueError (a bug) if a name is empty, too long or given twice."""
        checked = checked_collections(names)
        self._update_conversation(conversation_id, {"collections": collections_json(checked)}, touch=False)

    def _update_conversation(self, conversation_id: int, changes: dict[str, Any], *, touch: bool = True) -> None:
        if touch:
            changes["updated"] = self._clock()
        # Column names come from the fixed keys above, never from the caller.
        assignments = ", ".join(f"{column} = ?" for column in changes)
        with self.transaction() as conn:
            cursor = conn.execute(
                f"UPDATE conversations SET {assignments} WHERE id = ?",
                (*changes.values(), conversation_id),
            )
            if cursor.rowcount == 0:
                raise KeyError(conversation_id)

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation and all its messages."""
        with self.transaction() as conn:
            cursor = conn.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
            if cursor.rowcount == 0:
                raise KeyError(conversation_id)

    def search_conversations(self, query: str) -> list[Conversation]:
        """Conversations whose title or any message contains `query`, newest first.

        The match ignores case in every language (Python's casefold, not SQLite's
        ASCII-only LIKE), and every character of the query is plain text: `%`, `_`,
        quotes, `*`, NEAR, OR and parentheses included.
        """
        folded = search_fold(query)
        # Titles are few (one per conversation), so they are folded on the fly.
        with self._translate_errors():
            rows = self._conn.execute(
                "SELECT * FROM conversations AS c"
                " WHERE instr(kestrel_fold(c.title), :q) > 0"
                f" OR {self._messages_containing(folded)}"
                " ORDER BY c.updated DESC, c.id DESC",
                {"q": folded, "phrase": fts5_phrase(folded)},
            ).fetchall()
        return [conversation_from_row(row) for row in rows]

    def _messages_containing(self, folded: str) -> str:
        """The SQL test for `folded` in a conversation's messages: by index or by scan."""
        # A trigram index holds no string shorter than 3 characters.
        if len(folded) >= 3:
            hits = self._conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM message_search"
                " WHERE message_search MATCH ? LIMIT ?)",
                (fts5_phrase(folded), _INDEX_HITS_MAX + 1),
            ).fetchone()[0]
            if hits <= _INDEX_HITS_MAX:
                return _CONTAINING_VIA_INDEX
        return _CONTAINING_VIA_SCAN

    # Messages

    def add_message(
        self,
        conversation_id: int,
        role: Role,
        text: str,
        *,
        state: MessageState = MessageState.COMPLETE,
        stats: AnswerStats | None = None,
        parts: tuple[Part, ...] = (),
        attachments: Sequence[AttachedFile] = (),
        images: Sequence[AttachedImage] = (),
    ) -> Message:
        """Append a message to a conversation; it is committed when this returns.

        parts: an assistant turn's text, tool calls and results (Message.parts); ValueError
        if a part is wrong or the message is no assistant's. attachments: the files the user
        attached to this message, with their text (Message.attachments); ValueError if one is
        wrong or past the limits of app/core/attachments.py, or the message is no user's. images:
        the images the user attached (Message.images), kept in their own table; ValueError as for
        attachments.
        """
        parts = parts_for(Role(role), parts)
        files = attachments_for(Role(role), attachments)
        pictures = images_for(Role(role), images)
        now = self._clock()
        try:
            with self.transaction() as conn:
                cursor = conn.execute(
                    "INSERT INTO messages"
                    " (conversation_id, role, text, created, state, stats, folded, parts, attachments)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (conversation_id, Role(role).value, text, now, MessageState(state).value,
                     stats_json(stats), message_fold(text, parts, files), parts_json(parts),
                     attachments_json(files)),
                )
                store_images(conn, inserted_id(cursor), pictures)
                conn.execute(
                    "UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id)
                )
        except sqlite3.IntegrityError as error:
            if error_code(error) != SQLITE_CONSTRAINT_FOREIGNKEY:
                raise
            raise KeyError(conversation_id) from error
        return self.get_message(inserted_id(cursor))

    def get_message(self, message_id: int) -> Message:
        """The message with this id; KeyError if there is none."""
        with self._translate_errors():
            row = self._conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
            ).fetchone()
            if row is None:
                raise KeyError(message_id)
            return with_images(self._conn, [message_from_row(row)])[0]

    def messages(self, conversation_id: int) -> list[Message]:
        """The messages of a conversation, oldest first."""
        with self._translate_errors():
            rows = self._conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY id",
                (conversation_id,),
            ).fetchall()
            return with_images(self._conn, [message_from_row(row) for row in rows], conversation_id=conversation_id)

    def update_message(
        self,
        message_id: int,
        *,
        text: str | None = None,
        state: MessageState | None = None,
        stats: AnswerStats | None = None,
        thinking: str | None = None,
        parts: tuple[Part, ...] | None = None,
        sources: Sequence[SourceRef] | None = None,
    ) -> None:
        """Change the given fields of a message; fields left as None stay.

        parts replaces all of the turn's parts (() clears them); ValueError if a part is
        wrong or the message is no assistant's. sources replaces the answer's sources (()
        clears them); ValueError if one is wrong or the message is no assistant's.
        """
        changes: dict[str, Any] = {}
        if sources is not None:
            changes["sources"] = sources_json(sources_for(Role.ASSISTANT, sources))
        if text is not None:
            changes["text"] = text
        if parts is not None:
            parts = checked_parts(parts)
            changes["parts"] = parts_json(parts)
        if thinking is not None:
            changes["thinking"] = thinking
        if state is not None:
            changes["state"] = MessageState(state).value
        if stats is not None:
            changes["stats"] = stats_json(stats)
        if not changes:
            return
        assignments = [f"{column} = ?" for column in changes]
        values = list(changes.values())
        if text is not None or parts is not None:
            # The search copy, from the new text and parts or the stored ones where only
            # one of them changes (the right of SET reads the row as it was).
            assignments.append("folded = kestrel_fold_message({}, {}, attachments)".format(
                "text" if text is None else "?", "parts" if parts is None else "?"))
            values += [value for value in (text, changes.get("parts")) if value is not None]
        with self.transaction() as conn:
            if parts or sources is not None:
                found = conn.execute("SELECT role FROM messages WHERE id = ?", (message_id,)).fetchone()
                if found is not None and found["role"] != Role.ASSISTANT.value:
                    has = "parts" if parts else "sources"
                    raise ValueError(f"message {message_id} is a {found['role']} message: only an answer has {has}.")
            cursor = conn.execute(
                f"UPDATE messages SET {', '.join(assignments)} WHERE id = ?",
                (*values, message_id),
            )
            if cursor.rowcount == 0:
                raise KeyError(message_id)

    def delete_messages_from(self, conversation_id: int, message_id: int) -> int:
        """Delete a message and every later one in its conversation; return how many.

        KeyError if the message is not in that conversation.
        """
        with self.transaction() as conn:
            found = conn.execute(
                "SELECT 1 FROM messages WHERE id = ? AND conversation_id = ?",
                (message_id, conversation_id),
            ).fetchone()
            if found is None:
                raise KeyError(message_id)
            cursor = conn.execute(
                "DELETE FROM messages WHERE conversation_id = ? AND id >= ?",
                (conversation_id, message_id),
            )
            conn.execute(
                "UPDATE conversations SET updated = ? WHERE id = ?",
                (self._clock(), conversation_id),
            )
        return cursor.rowcount

    def insert_conversation(self, conversation: Conversation) -> int:
        """Store a conversation read elsewhere (the history kept in memory while the
        file was damaged, an imported chat) with its own times and collections, under a new
        id; return that id."""
        names = checked_collections(conversation.collections)
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO conversations"
                " (title, created, updated, system_prompt, settings, model, collections)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (conversation.title, conversation.created, conversation.updated,
                 conversation.system_prompt, json.dumps(conversation.settings.to_dict()),
                 conversation.model, collections_json(names)),
            )
        return inserted_id(cursor)

    def insert_message(self, message: Message, conversation_id: int) -> int:
        """Store a message read elsewhere, with its time, state, stats, thinking, parts,
        attachments, images and sources, under a new id in the conversation `conversation_id`; return
        that id. ValueError as add_message and update_message raise it."""
        role = Role(message.role)
        parts = parts_for(role, message.parts)
        files = attachments_for(role, message.attachments)
        sources = sources_for(role, message.sources)
        pictures = images_for(role, message.images)
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO messages"
                " (conversation_id, role, text, created, state, stats, folded, thinking, parts, attachments, sources)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, role.value, message.text, message.created,
                 MessageState(message.state).value, stats_json(message.stats),
                 message_fold(message.text, parts, files), message.thinking, parts_json(parts),
                 attachments_json(files), sources_json(sources)),
            )
            store_images(conn, inserted_id(cursor), pictures)
        return inserted_id(cursor)

    def recover_interrupted(self) -> int:
        """Mark answers left STREAMING by a crash as INTERRUPTED; return how many."""
        with self.transaction() as conn:
            cursor = conn.execute(
                "UPDATE messages SET state = ? WHERE state = ?",
                (MessageState.INTERRUPTED.value, MessageState.STREAMING.value),
            )
        return cursor.rowcount
