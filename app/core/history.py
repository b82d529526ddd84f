"""The chat history: conversations and messages in one SQLite file."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.core.answer_stats import AnswerStats
from app.core.conversation import UNTITLED, Conversation, Message, MessageState, Part, Role
from app.core.generation import GenerationSettings
from app.core.history_schema import (
    DAMAGED,
    MIGRATIONS,
    SQLITE_CONSTRAINT_FOREIGNKEY,
    environment_problem,
    error_code,
    is_damage,
    search_fold,
)
from app.core.message_parts import checked_parts, parts_from_json, parts_json, searchable_text


class HistoryError(Exception):
    """The history cannot be read or written because of the user's machine.

    The message is meant for the user: it says what went wrong and what to do.
    """


class HistoryDamaged(HistoryError):
    """The history file is damaged, or is not a database: SQLite cannot read all of it.

    `path` is the file; `detail` what SQLite found, in its own words. Kestrel never
    changes such a file by itself: the user chooses (app/core/history_repair.py).
    """

    def __init__(self, message: str, path: Path, detail: str) -> None:
        super().__init__(message)
        self.path = path
        self.detail = detail


def check_damage(path: Path) -> None:
    """HistoryDamaged if the history file at `path` is damaged or is not a database.

    Runs SQLite's quick_check over a read-only connection, so a damaged file (and its
    WAL) is read and never written. A file that is missing, busy or unreadable is not
    called damaged here: the ordinary open says what is wrong with it.

    The cost is reading the file once: on a 280 MB history of 100,000 messages, 180 ms
    with the file in the OS cache and 1.5 s from a cold disk (the ordinary open takes
    190 ms); on 2,000 messages (6 MB), 4 ms cached and 40 ms cold.
    """
    if not path.is_file():
        return
    # An empty file passes (quick_check says ok): it is how SQLite itself starts a new
    # database, has no chats in it to lose, and opens as a new, empty history.
    companions = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm")]
    created = [companion for companion in companions if not companion.exists()]
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return
    cause: sqlite3.Error | None = None
    try:
        # quick_check reads every page and checks the structure of every table and
        # index; unlike integrity_check it does not match each index against its
        # table, which keeps it near the cost of reading the file once.
        rows = [tuple(row) for row in conn.execute("PRAGMA quick_check").fetchall()]
        damage = None if rows == [("ok",)] else _first_findings(rows)
    except sqlite3.DatabaseError as error:
        damage, cause = (str(error), error) if is_damage(error) else (None, None)
    finally:
        conn.close()
    if damage is not None:
        # A read-only look at a WAL database makes an empty WAL and its index: gone
        # again, so that the damaged file is found as it was left.
        for companion in created:
            with contextlib.suppress(OSError):
                if companion.name.endswith("-shm") or companion.stat().st_size == 0:
                    companion.unlink()
        raise damaged(path, damage) from cause


def _first_findings(rows: list[tuple[object, ...]]) -> str:
    """quick_check's report, cut to its first two findings (it may list thousands)."""
    lines = [line for row in rows for line in str(row[0]).splitlines()
             if line.strip() and not line.startswith("*** in database")]
    shown = "; ".join(lines[:2])
    return shown + (f"; and {len(lines) - 2} more" if len(lines) > 2 else "")


def damaged(path: Path, detail: str) -> HistoryDamaged:
    """The HistoryDamaged for the file at `path`, with the message the user reads."""
    return HistoryDamaged(DAMAGED.format(path=path), path, detail)


def _fold_or_null(text: str | None) -> str | None:
    return None if text is None else search_fold(text)


def message_fold(text: str, parts: tuple[Part, ...]) -> str:
    """A message's search copy: its text, then what else search finds in its parts."""
    extra = searchable_text(parts)
    return search_fold(f"{text}\n{extra}" if extra else text)


def _fold_stored_message(text: str | None, parts: str | None) -> str | None:
    """message_fold over a row's columns, for SQL (a row another program wrote included)."""
    return None if text is None else message_fold(text, parts_from_json(parts))


# messages.folded is the search's copy of the text; reading a message never needs it.
_MESSAGE_COLUMNS = "id, conversation_id, role, text, created, state, stats, thinking, parts"

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


class HistoryStore:
    """Conversations and their messages, kept in a SQLite database at `path`.

    Every public method commits before it returns. Use it from one thread at a time;
    `check_same_thread=False` lets the thread that closes it differ from the one that
    opened it, as sqlite3.connect allows.
    """

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 5.0,
        check_same_thread: bool = True,
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
        if str(self.path) != ":memory:":
            # Before anything writes: a damaged file is reported as it was found.
            check_damage(self.path)
        with self._translate_errors():
            # isolation_level=None: transactions are opened only by transaction().
            self._conn = sqlite3.connect(
                self.path,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=check_same_thread,
            )
        try:
            with self._translate_errors():
                self._configure()
                self._migrate()
                self._fold_missing()
        except BaseException:
            self._conn.close()
            raise

    def _configure(self) -> None:
        self._conn.row_factory = sqlite3.Row
        self._conn.create_function("kestrel_fold", 1, _fold_or_null, deterministic=True)
        self._conn.create_function("kestrel_fold_message", 2, _fold_stored_message, deterministic=True)
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

    def _fold_missing(self) -> None:
        # Messages another program added without the folded copy (see _migrate_to_v2)
        # become searchable now. The read goes first so an ordinary start, and a
        # read-only file, need no write lock.
        missing = self._conn.execute(
            "SELECT 1 FROM messages WHERE folded IS NULL LIMIT 1"
        ).fetchone()
        if missing is not None:
            with self.transaction() as conn:
                conn.execute(
                    "UPDATE messages SET folded = kestrel_fold_message(text, parts) WHERE folded IS NULL"
                )

    @contextmanager
    def _translate_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as error:
            if is_damage(error):
                raise damaged(self.path, str(error)) from error
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

    def data_version(self) -> int:
        """SQLite's data_version on this connection: it moves only when another connection
        (another Kestrel) committed, never for this store's own writes."""
        with self._translate_errors():
            # fetchall: a statement left unfinished would keep its snapshot (and its version).
            return int(self._conn.execute("PRAGMA data_version").fetchall()[0][0])

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # Conversations

    def create_conversation(
        self,
        title: str = UNTITLED,
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
        return self.get_conversation(_inserted_id(cursor))

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

    def choose_model(self, conversation_id: int, model: str | None) -> None:
        """The model this chat answers with (None: the default model); no activity."""
        self._update_conversation(conversation_id, {"model": model}, touch=False)

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
                {"q": folded, "phrase": _fts5_phrase(folded)},
            ).fetchall()
        return [_conversation(row) for row in rows]

    def _messages_containing(self, folded: str) -> str:
        """The SQL test for `folded` in a conversation's messages: by index or by scan."""
        # A trigram index holds no string shorter than 3 characters.
        if len(folded) >= 3:
            hits = self._conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM message_search"
                " WHERE message_search MATCH ? LIMIT ?)",
                (_fts5_phrase(folded), _INDEX_HITS_MAX + 1),
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
    ) -> Message:
        """Append a message to a conversation; it is committed when this returns.

        parts: an assistant turn's text, tool calls and results (Message.parts); ValueError
        if a part is wrong or the message is no assistant's.
        """
        parts = _parts_for(Role(role), parts)
        now = self._clock()
        try:
            with self.transaction() as conn:
                cursor = conn.execute(
                    "INSERT INTO messages"
                    " (conversation_id, role, text, created, state, stats, folded, parts)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (conversation_id, Role(role).value, text, now, MessageState(state).value,
                     _stats_json(stats), message_fold(text, parts), parts_json(parts)),
                )
                conn.execute(
                    "UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id)
                )
        except sqlite3.IntegrityError as error:
            if error_code(error) != SQLITE_CONSTRAINT_FOREIGNKEY:
                raise
            raise KeyError(conversation_id) from error
        return self.get_message(_inserted_id(cursor))

    def get_message(self, message_id: int) -> Message:
        """The message with this id; KeyError if there is none."""
        with self._translate_errors():
            row = self._conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
            ).fetchone()
        if row is None:
            raise KeyError(message_id)
        return _message(row)

    def messages(self, conversation_id: int) -> list[Message]:
        """The messages of a conversation, oldest first."""
        with self._translate_errors():
            rows = self._conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY id",
                (conversation_id,),
            ).fetchall()
        return [_message(row) for row in rows]

    def update_message(
        self,
        message_id: int,
        *,
        text: str | None = None,
        state: MessageState | None = None,
        stats: AnswerStats | None = None,
        thinking: str | None = None,
        parts: tuple[Part, ...] | None = None,
    ) -> None:
        """Change the given fields of a message; fields left as None stay.

        parts replaces all of the turn's parts (() clears them); ValueError if a part is
        wrong or the message is no assistant's.
        """
        changes: dict[str, Any] = {}
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
            changes["stats"] = _stats_json(stats)
        if not changes:
            return
        assignments = [f"{column} = ?" for column in changes]
        values = list(changes.values())
        if text is not None or parts is not None:
            # The search copy, from the new text and parts or the stored ones where only
            # one of them changes (the right of SET reads the row as it was).
            assignments.append("folded = kestrel_fold_message({}, {})".format(
                "text" if text is None else "?", "parts" if parts is None else "?"))
            values += [value for value in (text, changes.get("parts")) if value is not None]
        with self.transaction() as conn:
            if parts:
                found = conn.execute("SELECT role FROM messages WHERE id = ?", (message_id,)).fetchone()
                if found is not None and found["role"] != Role.ASSISTANT.value:
                    raise ValueError(f"message {message_id} is a {found['role']} message: only an answer has parts.")
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
        file was damaged) with its own times, under a new id; return that id."""
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO conversations"
                " (title, created, updated, system_prompt, settings, model)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (conversation.title, conversation.created, conversation.updated,
                 conversation.system_prompt, json.dumps(conversation.settings.to_dict()),
                 conversation.model),
            )
        return _inserted_id(cursor)

    def insert_message(self, message: Message, conversation_id: int) -> int:
        """Store a message read elsewhere, with its time, state, stats, thinking and parts,
        under a new id in the conversation `conversation_id`; return that id."""
        parts = _parts_for(message.role, message.parts)
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO messages"
                " (conversation_id, role, text, created, state, stats, folded, thinking, parts)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, Role(message.role).value, message.text, message.created,
                 MessageState(message.state).value, _stats_json(message.stats),
                 message_fold(message.text, parts), message.thinking, parts_json(parts)),
            )
        return _inserted_id(cursor)

    def recover_interrupted(self) -> int:
        """Mark answers left STREAMING by a crash as INTERRUPTED; return how many."""
        with self.transaction() as conn:
            cursor = conn.execute(
                "UPDATE messages SET state = ? WHERE state = ?",
                (MessageState.INTERRUPTED.value, MessageState.STREAMING.value),
            )
        return cursor.rowcount


def _fts5_phrase(text: str) -> str:
    """`text` as one FTS5 phrase, so no character of it is query syntax."""
    return '"' + text.replace('"', '""') + '"'


def _inserted_id(cursor: sqlite3.Cursor) -> int:
    """The row id an INSERT just made (sqlite3 types it Optional for other statements)."""
    row_id = cursor.lastrowid
    if row_id is None:
        raise RuntimeError("INSERT gave no row id")
    return row_id


def _parts_for(role: Role, parts: tuple[Part, ...]) -> tuple[Part, ...]:
    """The parts checked for keeping; ValueError (a bug) if one is wrong or `role` has none."""
    if parts and role != Role.ASSISTANT:
        raise ValueError(f"a {role.value} message has no parts: only an answer uses tools.")
    return checked_parts(parts)


def _stats_json(stats: AnswerStats | None) -> str | None:
    return None if stats is None else stats.to_json()


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
    return Message(
        id=row["id"],
        conversation_id=row["conversation_id"],
        role=Role(row["role"]),
        text=row["text"],
        created=row["created"],
        state=MessageState(row["state"]),
        stats=AnswerStats.from_json(row["stats"]),
        thinking=row["thinking"] or "",
        parts=parts_from_json(row["parts"]) if row["role"] == Role.ASSISTANT.value else (),
    )
