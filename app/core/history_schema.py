"""The history database's schema migrations, and which SQLite errors are the user's to fix."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path


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
SQLITE_CONSTRAINT_FOREIGNKEY = 787


def error_code(error: sqlite3.Error) -> int | None:
    """SQLite's (extended) result code behind an error, where it has one."""
    return getattr(error, "sqlite_errorcode", None)


def environment_problem(error: sqlite3.Error, path: Path) -> str | None:
    """A message for the user if `error` comes from their machine, else None."""
    code = error_code(error)
    if code is None:
        return None
    # Extended result codes keep the primary code in their low byte.
    template = _PROBLEMS.get(code & 0xFF)
    return None if template is None else template.format(path=path)
