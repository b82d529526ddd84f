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


def search_fold(text: str) -> str:
    """The form of `text` that search compares: Python's casefold, for every language.

    SQLite's own folding maps one character to one ('ß' stays 'ß', 'ﬁ' stays 'ﬁ'), so
    the history stores this form next to each message rather than asking SQLite.
    """
    # FTS5 stops reading a text or a query at a NUL, so NUL becomes U+FFFD on both
    # sides. Changing this needs a migration that refolds every stored message.
    return text.casefold().replace("\0", "\ufffd")


# The trigram tokenizer came in SQLite 3.34.0. Python 3.11's Windows installers bundle
# a newer SQLite with FTS5; a Linux Python linked to an older system SQLite lacks it.
FTS5_TRIGRAM_SINCE = (3, 34, 0)


def _migrate_to_v2(conn: sqlite3.Connection) -> None:
    if sqlite3.sqlite_version_info < FTS5_TRIGRAM_SINCE:
        raise RuntimeError(
            f"Kestrel's history search needs SQLite {'.'.join(map(str, FTS5_TRIGRAM_SINCE))}"
            f" or newer with FTS5; this Python has SQLite {sqlite3.sqlite_version}."
        )
    # messages.folded holds search_fold(text), written by HistoryStore. Keeping it in a
    # column, not computed by a trigger, means the triggers use plain SQL: a program that
    # writes the file without Kestrel's functions (a DB browser) still can. A row it adds
    # with folded NULL is folded on Kestrel's next start (the partial index finds it); a
    # text it edits stays found by its old folded copy until Kestrel writes that message.
    conn.execute("ALTER TABLE messages ADD COLUMN folded TEXT")
    conn.create_function("kestrel_search_fold", 1, search_fold, deterministic=True)
    conn.execute("UPDATE messages SET folded = kestrel_search_fold(text)")
    conn.execute("CREATE INDEX messages_unfolded ON messages(id) WHERE folded IS NULL")
    # External content: the index reads messages.folded, so the text is not stored a
    # third time. Trigrams match any substring of 3 or more characters; the text is
    # folded already, hence case_sensitive 1 (SQLite folding it again could only add
    # matches Python's casefold would not make).
    conn.execute(
        "CREATE VIRTUAL TABLE message_search USING fts5("
        " folded, content='messages', content_rowid='id',"
        " tokenize='trigram case_sensitive 1')"
    )
    conn.execute("INSERT INTO message_search(message_search) VALUES ('rebuild')")
    # An external-content index must be told the old values to forget: the triggers
    # pass old.folded, exactly what was indexed, so the index never drifts from the
    # column. UPDATE OF folded: a state or stats change does not touch the index.
    conn.execute(
        "CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN"
        " INSERT INTO message_search(rowid, folded) VALUES (new.id, new.folded);"
        " END"
    )
    conn.execute(
        "CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN"
        " INSERT INTO message_search(message_search, rowid, folded)"
        "  VALUES ('delete', old.id, old.folded);"
        " END"
    )
    conn.execute(
        "CREATE TRIGGER message_search_update AFTER UPDATE OF folded ON messages BEGIN"
        " INSERT INTO message_search(message_search, rowid, folded)"
        "  VALUES ('delete', old.id, old.folded);"
        " INSERT INTO message_search(rowid, folded) VALUES (new.id, new.folded);"
        " END"
    )


def _migrate_to_v3(conn: sqlite3.Connection) -> None:
    # A reasoning model's thinking, kept apart from its answer (not searched: it is not
    # what the user reads as the chat).
    conn.execute("ALTER TABLE messages ADD COLUMN thinking TEXT NOT NULL DEFAULT ''")


def _migrate_to_v4(conn: sqlite3.Connection) -> None:
    # The unsent text of each chat; chat 0 is the new chat, not saved yet, which is why
    # there is no foreign key: a trigger forgets a deleted chat's draft instead.
    conn.execute(
        "CREATE TABLE drafts (chat INTEGER PRIMARY KEY, text TEXT NOT NULL, updated REAL NOT NULL)"
    )
    conn.execute(
        "CREATE TRIGGER drafts_forget AFTER DELETE ON conversations BEGIN"
        " DELETE FROM drafts WHERE chat = old.id;"
        " END"
    )
    # Until now conversations.model held whichever model was loaded when the chat was
    # made, never a choice of the user's; kept, it would pin every old chat to that
    # model. NULL is "the default model", which is what those chats have always used.
    conn.execute("UPDATE conversations SET model = NULL")


def _migrate_to_v5(conn: sqlite3.Connection) -> None:
    # A turn that used tools keeps its calls and results as parts, in order, as JSON
    # (app/core/message_parts.py): a column, not a table of parts, because a turn is always
    # read, written and deleted whole (regenerate, edit, export), and the repair's copy
    # of a damaged file then carries one more column, not a second table to match up.
    # Existing turns used no tools: "[]". Their search copy stays as it is; a turn with
    # tools adds its calls' names and arguments and its results' text to it.
    conn.execute("ALTER TABLE messages ADD COLUMN parts TEXT NOT NULL DEFAULT '[]'")


def _migrate_to_v6(conn: sqlite3.Connection) -> None:
    # Documents in a chat (app/core/attachments.py, as JSON by app/core/attachment_data.py):
    # the files attached to a user message, with the text read from them, so the chat answers
    # from them after a restart or an import; the sources an answer was given; the collections
    # a chat answers from. Columns, like parts, because each is read and written with its row,
    # and a repair then carries columns, not tables to match up. Existing rows have none ("[]"),
    # so their search copies stay as they are (a message's copy adds its files' names).
    conn.execute("ALTER TABLE messages ADD COLUMN attachments TEXT NOT NULL DEFAULT '[]'")
    conn.execute("ALTER TABLE messages ADD COLUMN sources TEXT NOT NULL DEFAULT '[]'")
    conn.execute("ALTER TABLE conversations ADD COLUMN collections TEXT NOT NULL DEFAULT '[]'")


def _migrate_to_v7(conn: sqlite3.Connection) -> None:
    # Images attached to a user message (app/core/attachments.py AttachedImage, as the image check
    # left them): a table of their own, not a column of JSON like the files, because each is up
    # to a few MB of bytes, kept as a BLOB (base64 in JSON would add a third and be parsed with
    # every row). Keyed by message and position; deleting a message (a chat, a regenerate)
    # deletes its images. The id is for the repair, which reads a damaged table by row id.
    # Not searched: a message's search copy stays its text and its files' names.
    conn.execute(
        "CREATE TABLE message_images ("
        " id INTEGER PRIMARY KEY,"
        " message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,"
        " position INTEGER NOT NULL,"
        " name TEXT NOT NULL,"
        " mime TEXT NOT NULL,"
        " width INTEGER NOT NULL,"
        " height INTEGER NOT NULL,"
        " note TEXT NOT NULL DEFAULT '',"
        " data BLOB NOT NULL,"
        " UNIQUE (message_id, position))"
    )


def _migrate_to_v8(conn: sqlite3.Connection) -> None:
    # Memories (app/core/memories.py): facts the person asked Kestrel to remember, in the history's
    # file so that one backup, one repair and one privacy rule cover them. The chat a memory came
    # from is kept while that chat is; deleting the chat keeps the memory (SET NULL).
    conn.execute(
        "CREATE TABLE memories ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " text TEXT NOT NULL,"
        " created REAL NOT NULL,"
        " origin TEXT NOT NULL,"
        " conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,"
        " enabled INTEGER NOT NULL DEFAULT 1)"
    )
    conn.execute("CREATE INDEX memories_by_conversation ON memories(conversation_id)")
    # BM25 over the memories with the documents' tokenizer (app/documents/search.py quotes the
    # question's words for it), external content so the text is kept once. The triggers tell the
    # index the old text to forget, so a deleted or edited memory's words leave it with it.
    conn.execute(
        "CREATE VIRTUAL TABLE memory_search USING fts5("
        " text, content='memories', content_rowid='id',"
        " tokenize='porter unicode61 remove_diacritics 2')"
    )
    conn.execute(
        "CREATE TRIGGER memory_search_insert AFTER INSERT ON memories BEGIN"
        " INSERT INTO memory_search(rowid, text) VALUES (new.id, new.text);"
        " END"
    )
    conn.execute(
        "CREATE TRIGGER memory_search_delete AFTER DELETE ON memories BEGIN"
        " INSERT INTO memory_search(memory_search, rowid, text) VALUES ('delete', old.id, old.text);"
        " END"
    )
    conn.execute(
        "CREATE TRIGGER memory_search_update AFTER UPDATE OF text ON memories BEGIN"
        " INSERT INTO memory_search(memory_search, rowid, text) VALUES ('delete', old.id, old.text);"
        " INSERT INTO memory_search(rowid, text) VALUES (new.id, new.text);"
        " END"
    )
    # Which memories an answer was given (their ids, as JSON: "used 3 memories"); ids, not texts,
    # so a forgotten memory leaves no copy behind. And whether a chat uses memory at all.
    conn.execute("ALTER TABLE messages ADD COLUMN memories TEXT NOT NULL DEFAULT '[]'")
    conn.execute("ALTER TABLE conversations ADD COLUMN memory INTEGER NOT NULL DEFAULT 1")


def _migrate_to_v9(conn: sqlite3.Connection) -> None:
    # Projects (app/core/projects.py): a named group of chats with its own instructions, model, tools,
    # collections and memory choice, in the history's file like the memories. A chat belongs to one
    # project or none; removing a project keeps its chats, out of any project (SET NULL). The lists are
    # JSON, as a chat's collections are.
    conn.execute(
        "CREATE TABLE projects ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " name TEXT NOT NULL,"
        " instructions TEXT NOT NULL DEFAULT '',"
        " model TEXT,"
        " tools TEXT NOT NULL DEFAULT '[]',"
        " collections TEXT NOT NULL DEFAULT '[]',"
        " memory INTEGER NOT NULL DEFAULT 1,"
        " created REAL NOT NULL,"
        " updated REAL NOT NULL)"
    )
    conn.execute("ALTER TABLE conversations ADD COLUMN project_id INTEGER REFERENCES projects(id) ON DELETE SET NULL")
    conn.execute("CREATE INDEX conversations_by_project ON conversations(project_id)")


def _migrate_to_v10(conn: sqlite3.Connection) -> None:
    # The memories' vectors, so that the most relevant are chosen by meaning as well as by words
    # (app/service/chats/memory/memory_choice.py): one per memory, from the documents' embedding
    # model (its id in `model`: another model's vector is replaced, never compared), as little-endian
    # float32. Here, not in the documents' index, so that forgetting a memory takes its vector with
    # it (ON DELETE CASCADE; secure_delete overwrites it) and one backup or repair covers both.
    conn.execute(
        "CREATE TABLE memory_vectors ("
        " memory_id INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,"
        " model TEXT NOT NULL,"
        " vector BLOB NOT NULL)"
    )
    # New words are another meaning: the old vector goes with the old text, and a new one is made.
    conn.execute(
        "CREATE TRIGGER memory_vectors_edited AFTER UPDATE OF text ON memories BEGIN"
        " DELETE FROM memory_vectors WHERE memory_id = old.id;"
        " END"
    )
    # A counter every change of the vectors that selection reads moves (a vector kept, replaced or
    # deleted, a memory turned on or off), so that it keeps them in memory between two answers and
    # reads them again only when it moved (reading 10,000 of them took 16 ms, the whole budget).
    conn.execute("CREATE TABLE memory_vectors_changes (id INTEGER PRIMARY KEY CHECK (id = 1), count INTEGER NOT NULL)")
    conn.execute("INSERT INTO memory_vectors_changes (id, count) VALUES (1, 0)")
    for name, event in (("kept", "INSERT ON memory_vectors"), ("replaced", "UPDATE ON memory_vectors"),
                        ("deleted", "DELETE ON memory_vectors"), ("switched", "UPDATE OF enabled ON memories")):
        conn.execute(f"CREATE TRIGGER memory_vectors_{name} AFTER {event} BEGIN"
                     " UPDATE memory_vectors_changes SET count = count + 1 WHERE id = 1;"
                     " END")


# MIGRATIONS[n] turns a version-n database into version n+1. Append only: a released
# migration is never edited, because users' files have already been through it.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _migrate_to_v1, _migrate_to_v2, _migrate_to_v3, _migrate_to_v4, _migrate_to_v5, _migrate_to_v6,
    _migrate_to_v7, _migrate_to_v8, _migrate_to_v9, _migrate_to_v10,
]

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
DAMAGED = (
    "The chat history file {path} is damaged or is not a Kestrel history. Kestrel "
    "leaves the file as it is: choose whether to recover what can still be read from "
    "it or to start a fresh history (the damaged file is kept either way)."
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
    11: DAMAGED,  # SQLITE_CORRUPT
    13: (  # SQLITE_FULL
        "The disk that holds your chat history ({path}) is full. Free some space, "
        "then try again."
    ),
    14: _READ_ONLY,  # SQLITE_CANTOPEN
    26: DAMAGED,  # SQLITE_NOTADB
}
SQLITE_CONSTRAINT_FOREIGNKEY = 787
# The primary codes that mean the file itself is damaged, not the machine around it.
_DAMAGE_CODES = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB


def error_code(error: sqlite3.Error) -> int | None:
    """SQLite's (extended) result code behind an error, where it has one."""
    return getattr(error, "sqlite_errorcode", None)


def is_damage(error: sqlite3.Error) -> bool:
    """True if `error` says the database file is damaged or is not a database."""
    code = error_code(error)
    return code is not None and code & 0xFF in _DAMAGE_CODES


def environment_problem(error: sqlite3.Error, path: Path) -> str | None:
    """A message for the user if `error` comes from their machine, else None."""
    code = error_code(error)
    if code is None:
        return None
    # Extended result codes keep the primary code in their low byte.
    template = _PROBLEMS.get(code & 0xFF)
    return None if template is None else template.format(path=path)
