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


class HistoryError(Exception):
    """The history cannot be read or written because of the user's machine.

    The message is meant for the user: it says what went wrong and what to do.
    """


def _migrate_to_v1(conn: sqlite3.Connection) -> None:
    # AUTOINCREMENT so an id is never handed out twice, even after the newest rows are
    # deleted (regenerate): the UI keys its rows by id.
    conn.execute(
        "CREATE TABLE conversations ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " title TEXT NOT NULL,"
        " created REAL NOT NULL,"
        " updated REAL NOT NULL,"
        " system_prompt TEXT NOT NULL DEFAULT '',"
        " settings TEXT NOT NULL,"
        " model TEXT)"
    )
    conn.execute(
        "CREATE TABLE messages ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " conversation_id INTEGER NOT NULL"
        "  REFERENCES conversations(id) ON DELETE CASCADE,"
        " role TEXT NOT NULL,"
        " text TEXT NOT NULL,"
        " created REAL NOT NULL,"
        " state TEXT NOT NULL,"
        " stats TEXT)"
    )
    conn.execute("CREATE INDEX messages_by_conversation ON messages(conversation_id, id)")
    conn.execute("CREATE INDEX conversations_by_updated ON conversations(updated)")


# MIGRATIONS[n] turns a version-n database into version n+1. Append only: a released
# migration is never edited, because users' files have already been through it.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_migrate_to_v1]

# Primary result codes (sqlite3.h) that come from the user's machine, not from a bug,
# and what the user should do about each.
_READ_ONLY = (
    "Kestrel cannot write its chat history at {path}. Check that the file and its "
    "folder exist and are not read-only, then restart Kestrel."
)
_BUSY = (
    "The chat history ({path}) is in use by another program, perhaps a second copy "
    "of Kestrel. Close it, then try again."
)
_DAMAGED = (
    "The chat history file {path} is damaged or is not a Kestrel history. Close "
    "Kestrel, move that file somewhere else to keep it, and start Kestrel again to "
    "begin a new history."
)
_PROBLEMS = {
    3: _READ_ONLY,  # SQLITE_PERM
    5: _BUSY,  # SQLITE_BUSY
    6: _BUSY,  # SQLITE_LOCKED
    8: _READ_ONLY,  # SQLITE_READONLY
    10: (  # SQLITE_IOERR
        "The disk reported an error while Kestrel used its chat history at {path}. "
        "Check the drive, then try again."
    ),
    11: _DAMAGED,  # SQLITE_CORRUPT
    13: (  # SQLITE_FULL
        "The disk that holds your chat history ({path}) is full. Free some space, "
        "then try again."
    ),
    14: _READ_ONLY,  # SQLITE_CANTOPEN
    26: _DAMAGED,  # SQLITE_NOTADB
}
_SQLITE_CONSTRAINT_FOREIGNKEY = 787
# Python 3.10 has no sqlite_errorcode; there, SQLite's fixed messages (sqlite3ErrStr)
# tell the codes apart.
_CODES_BY_MESSAGE = {
    "access permission denied": 3,
    "database is locked": 5,
    "database table is locked": 6,
    "attempt to write a readonly database": 8,
    "disk i/o error": 10,
    "database disk image is malformed": 11,
    "database or disk is full": 13,
    "unable to open database file": 14,
    "file is not a database": 26,
    "foreign key constraint failed": _SQLITE_CONSTRAINT_FOREIGNKEY,
}


def _error_code(error: sqlite3.Error) -> int | None:
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code
    return _CODES_BY_MESSAGE.get(str(error).lower())


def _environment_problem(error: sqlite3.Error, path: Path) -> str | None:
    """A message for the user if `error` comes from their machine, else None."""
    code = _error_code(error)
    if code is None:
        return None
    # Extended result codes keep the primary code in their low byte.
    template = _PROBLEMS.get(code & 0xFF)
    return None if template is None else template.format(path=path)


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
            problem = _environment_problem(error, self.path)
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
            if _error_code(error) != _SQLITE_CONSTRAINT_FOREIGNKEY:
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
