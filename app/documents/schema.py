"""The documents database: one SQLite file of collections, files, chunks, their FTS5 index and vectors."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.documents.collections import IndexUnavailable

SCHEMA_VERSION = 1
# One key of `meta`: bumped by triggers on every vector written or dropped, so that a
# search's in-memory copy of the vectors knows it is stale, whichever process wrote.
VECTORS_VERSION = "vectors_version"

_SCHEMA = """
CREATE TABLE collections (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    folder TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    indexed_at REAL
);
CREATE TABLE files (
    id INTEGER PRIMARY KEY,
    collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    cause TEXT,
    chunks INTEGER NOT NULL DEFAULT 0,
    UNIQUE (collection_id, path)
);
CREATE INDEX files_by_state ON files(collection_id, state);
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    page INTEGER,
    heading TEXT,
    text TEXT NOT NULL
);
CREATE INDEX chunks_by_file ON chunks(file_id);
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    text, content='chunks', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TABLE vectors (
    model TEXT NOT NULL,
    chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, chunk_id)
) WITHOUT ROWID;
CREATE INDEX vectors_by_chunk ON vectors(chunk_id);
CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO meta VALUES ('vectors_version', 0);
CREATE TRIGGER vectors_written AFTER INSERT ON vectors BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'vectors_version';
END;
CREATE TRIGGER vectors_dropped AFTER DELETE ON vectors BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'vectors_version';
END;
"""

_PROBLEMS = {
    3: "Kestrel may not write its documents index at {path}. Check the folder's permissions, then try again.",
    5: "Another Kestrel is writing the documents index at {path}. Wait for it to finish, then try again.",
    6: "Another Kestrel is writing the documents index at {path}. Wait for it to finish, then try again.",
    8: "Kestrel may not write its documents index at {path}. Check the folder's permissions, then try again.",
    10: "The disk reported an error while Kestrel used its documents index at {path}. Check the drive, then try again.",
    11: ("The documents index at {path} is damaged. It holds nothing that is not in your folders: delete "
         "the file and add the folders again (kestrel docs add FOLDER)."),
    13: "The disk that holds the documents index ({path}) is full. Free some space, then try again.",
    14: "Kestrel cannot open its documents index at {path}. Check that the folder is there and writable.",
    26: ("{path} is not a documents index Kestrel can read. It holds nothing that is not in your folders: "
         "delete the file and add the folders again (kestrel docs add FOLDER)."),
}


def stored_path(path: str) -> str | bytes:
    """A file's path as the index keeps it: text, or, for a name that is not valid Unicode (bytes
    that are not UTF-8 on Linux, which Python carries as lone surrogates), its bytes as a BLOB,
    so that the file is still found and read by its real name."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path)
    return path


def loaded_path(value: str | bytes) -> str:
    """A path stored by stored_path, as Python names the file again."""
    return os.fsdecode(value) if isinstance(value, bytes) else value


def problem(error: sqlite3.Error, path: Path) -> IndexUnavailable | None:
    """The user's words for an error that comes from their machine (disk, permissions, another
    writer, a damaged file); None for one that is a bug."""
    code = getattr(error, "sqlite_errorcode", None)
    template = None if code is None else _PROBLEMS.get(code & 0xFF)
    return None if template is None else IndexUnavailable(template.format(path=path))


@contextmanager
def plain_errors(path: Path) -> Iterator[None]:
    """Turn SQLite's errors from the user's machine into DocumentsError; bugs raise as they are."""
    try:
        yield
    except sqlite3.Error as error:
        words = problem(error, path)
        if words is None:
            raise
        raise words from error


def open_database(path: Path) -> sqlite3.Connection:
    """The database at `path`, created or brought to this version; refuses one from a newer Kestrel."""
    with plain_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are ours (BEGIN IMMEDIATE in `transaction`).
        conn = sqlite3.connect(path, isolation_level=None, timeout=10.0, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            # A crash may lose the last commits, never the file: a lost file stays pending and is read again.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise IndexUnavailable(f"The documents index at {path} was written by a newer Kestrel "
                                       f"(version {version}). Update Kestrel, or delete the file and add "
                                       "the folders again.")
            if version < SCHEMA_VERSION:
                with transaction(conn):
                    for statement in _statements(_SCHEMA):
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            # Per connection, never stored: how many chunks hold a word (search.telling_words).
            conn.execute("CREATE VIRTUAL TABLE temp.chunks_vocab USING fts5vocab(main, 'chunks_fts', 'row')")
        except BaseException:
            conn.close()
            raise
    return conn


def _statements(script: str) -> list[str]:
    """The statements of a script, kept whole across the `;` inside a trigger's body."""
    statements, current = [], ""
    for line in script.strip().splitlines():
        current += line + "\n"
        if sqlite3.complete_statement(current):
            statements.append(current)
            current = ""
    return statements


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once (BEGIN IMMEDIATE) so that two writers queue instead
    of failing halfway; rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
