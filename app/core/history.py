"""The chat history: conversations and messages in one SQLite file."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.core.conversation import Conversation, Message, MessageState, Role
from app.core.generation import GenerationSettings
from app.core.history_schema import MIGRATIONS, SQLITE_CONSTRAINT_FOREIGNKEY, environment_problem, error_code


class HistoryError(Exception):
    """The history cannot be read or written because of the user's machine.

    The message is meant for the user: it says what went wrong and what to do.
    """


def _casefold(text: str | None) -> str | None:
    return None if text is None else text.casefold()


class HistoryStore:
    """Conversations and their messages, kept in a SQLite database at `path`.

    Every public method commits before it returns. Use it from one thread.
    """

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 5.0,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._depth = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise HistoryError(
                f"Kestrel cannot create the folder {self.path.parent} for its chat "
                f"history ({error.strerror}). Check its permissions, then restart Kestrel."
            ) from error
        with self._translate_errors():
            # isolation_level=None: transactions are opened only by transaction().
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None)
        try:
            with self._translate_errors():
                self._configure()
                self._migrate()
        except BaseException:
            self._conn.close()
            raise

    def _configure(self) -> None:
        self._conn.row_factory = sqlite3.Row
        self._conn.create_function("kestrel_fold", 1, _casefold, deterministic=True)
        self._conn.execute("PRAGMA journal_mode = WAL")
        # In WAL mode FULL costs one fsync per commit: about one a second while an
        # answer streams. It keeps a committed message through a power cut, where
        # NORMAL would keep it only through a crash of Kestrel itself.
        self._conn.execute("PRAGMA synchronous = FULL")
        self._conn.execute("PRAGMA foreign_keys = ON")

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise HistoryError(
                f"The chat history at {self.path} was written by a newer version of "
                f"Kestrel (history format {version}; this version reads up to "
                f"{len(MIGRATIONS)}). Update Kestrel to open it."
            )
        for target, migration in enumerate(MIGRATIONS[version:], start=version + 1):
            with self.transaction() as conn:
                migration(conn)
                # PRAGMA takes no parameters; target is an int we computed.
                conn.execute(f"PRAGMA user_version = {target:d}")

    @contextmanager
    def _translate_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as error:
            problem = environment_problem(error, self.path)
            if problem is None:
                raise
            raise HistoryError(problem) from error

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run the block in one transaction: commit at the end, roll back on error.

        A transaction opened inside another joins it. Errors from the user's machine
        come out as HistoryError.
        """
        with self._translate_errors():
            if self._depth == 0:
                # IMMEDIATE takes the write lock now, so a busy database fails here
                # rather than half-way through the block.
                self._conn.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield self._conn
                if self._depth == 1:
                    self._conn.commit()
            except BaseException:
                # A failed COMMIT (disk full) leaves the transaction open: end it too.
                if self._depth == 1 and self._conn.in_transaction:
                    self._conn.rollback()
                raise
            finally:
                self._depth -= 1

    def close(self) -> None:
        """Close the database; the store cannot be used afterwards."""
        self._conn.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # Conversations

    def create_conversation(
        self,
        title: str = "New chat",
        system_prompt: str = "",
        settings: GenerationSettings | None = None,
        model: str | None = None,
    ) -> Conversation:
        """Start a new, empty conversation and return it."""
        settings = (settings or GenerationSettings()).validated()
        now = self._clock()
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO conversations"
                " (title, created, updated, system_prompt, settings, model)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (title, now, now, system_prompt, json.dumps(settings.to_dict()), model),
            )
        return self.get_conversation(cursor.lastrowid)

    def get_conversation(self, conversation_id: int) -> Conversation:
        """The conversation with this id; KeyError if there is none."""
        with self._translate_errors():
            row = self._conn.execute(
                "SELECT * FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
        if row is None:
            raise KeyError(conversation_id)
        return _conversation(row)

    def list_conversations(self) -> list[Conversation]:
        """All conversations, the most recently updated first."""
        with self._translate_errors():
            rows = self._conn.execute(
                "SELECT * FROM conversations ORDER BY updated DESC, id DESC"
            ).fetchall()
        return [_conversation(row) for row in rows]

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
        ASCII-only LIKE), and `%` and `_` in the query are plain characters.
        """
        with self._translate_errors():
            rows = self._conn.execute(
                "SELECT * FROM conversations AS c"
                " WHERE instr(kestrel_fold(c.title), :q) > 0"
                " OR EXISTS (SELECT 1 FROM messages AS m WHERE m.conversation_id = c.id"
                "  AND instr(kestrel_fold(m.text), :q) > 0)"
                " ORDER BY c.updated DESC, c.id DESC",
                {"q": query.casefold()},
            ).fetchall()
        return [_conversation(row) for row in rows]

    # Messages

    def add_message(
        self,
        conversation_id: int,
        role: Role,
        text: str,
        *,
        state: MessageState = MessageState.COMPLETE,
        stats: dict[str, Any] | None = None,
    ) -> Message:
        """Append a message to a conversation; it is committed when this returns."""
        now = self._clock()
        try:
            with self.transaction() as conn:
                cursor = conn.execute(
                    "INSERT INTO messages"
                    " (conversation_id, role, text, created, state, stats)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (conversation_id, Role(role).value, text, now,
                     MessageState(state).value, _stats_json(stats)),
                )
                conn.execute(
                    "UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id)
                )
        except sqlite3.IntegrityError as error:
            if error_code(error) != SQLITE_CONSTRAINT_FOREIGNKEY:
                raise
            raise KeyError(conversation_id) from error
        return self.get_message(cursor.lastrowid)

    def get_message(self, message_id: int) -> Message:
        """The message with this id; KeyError if there is none."""
        with self._translate_errors():
            row = self._conn.execute(
                "SELECT * FROM messages WHERE id = ?", (message_id,)
            ).fetchone()
        if row is None:
            raise KeyError(message_id)
        return _message(row)

    def messages(self, conversation_id: int) -> list[Message]:
        """The messages of a conversation, oldest first."""
        with self._translate_errors():
            rows = self._conn.execute(
                "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id",
                (conversation_id,),
            ).fetchall()
        return [_message(row) for row in rows]

    def update_message(
        self,
        message_id: int,
        *,
        text: str | None = None,
        state: MessageState | None = None,
        stats: dict[str, Any] | None = None,
    ) -> None:
        """Change the given fields of a message; fields left as None stay."""
        changes: dict[str, Any] = {}
        if text is not None:
            changes["text"] = text
        if state is not None:
            changes["state"] = MessageState(state).value
        if stats is not None:
            changes["stats"] = _stats_json(stats)
        if not changes:
            return
        assignments = ", ".join(f"{column} = ?" for column in changes)
        with self.transaction() as conn:
            cursor = conn.execute(
                f"UPDATE messages SET {assignments} WHERE id = ?",
                (*changes.values(), message_id),
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

    def recover_interrupted(self) -> int:
        """Mark answers left STREAMING by a crash as INTERRUPTED; return how many."""
        with self.transaction() as conn:
            cursor = conn.execute(
                "UPDATE messages SET state = ? WHERE state = ?",
                (MessageState.INTERRUPTED.value, MessageState.STREAMING.value),
            )
        return cursor.rowcount


def _stats_json(stats: dict[str, Any] | None) -> str | None:
    return None if stats is None else json.dumps(stats)


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(
        id=row["id"],
        title=row["title"],
        created=row["created"],
        updated=row["updated"],
        system_prompt=row["system_prompt"],
        settings=GenerationSettings.from_dict(json.loads(row["settings"])),
        model=row["model"],
    )


def _message(row: sqlite3.Row) -> Message:
    stats = row["stats"]
    return Message(
        id=row["id"],
        conversation_id=row["conversation_id"],
        role=Role(row["role"]),
        text=row["text"],
        created=row["created"],
        state=MessageState(row["state"]),
        stats=None if stats is None else json.loads(stats),
    )
