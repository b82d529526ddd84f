"""Memories in the history database: kept, listed, searched by BM25 and by their vectors, and forgotten without a trace."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.memories import (MAX_MEMORIES, Memory, MemoryOrigin, MemoryRefused, RefusalReason, memory_ids_json,
                               memory_text)
from app.core.store.history_file import HistoryFile

_COLUMNS = MEMORY_COLUMNS = "id, text, created, origin, conversation_id, enabled"
# A word found in more than this share of the memories moves no BM25 score (its IDF is ~0) but
# makes FTS5 score nearly every row: it is left out of the query while another word remains.
_COMMON_SHARE = 0.5
# SQLite's limit on the ? of one statement is 32,766 since 3.32; ids are read in slices below it.
_IDS_PER_QUERY = 500


@dataclass(frozen=True)
class AddedMemory:
    """What add_memory did: the memory as kept, and whether it is new (False: the same text was kept
    already, and that memory is given back as it is)."""

    memory: Memory
    new: bool


def memory_from_row(row: Sequence[Any]) -> Memory:
    """A memory from a row of _COLUMNS; an origin this version does not know reads as by hand."""
    mid, text, created, origin, conversation_id, enabled = row
    try:
        kind = MemoryOrigin(origin)
    except ValueError:
        kind = MemoryOrigin.HAND
    return Memory(int(mid), str(text), float(created), kind,
                  conversation_id if isinstance(conversation_id, int) else None, bool(enabled))


def add_memory(store: HistoryFile, text: str, origin: MemoryOrigin, conversation_id: int | None = None, *,
               clock: Callable[[], float] = time.time) -> AddedMemory:
    """Keep a memory (memory_text's form of `text`). MemoryRefused if it is empty, too long, or
    MAX_MEMORIES are kept already. conversation_id: the chat it came from, kept only while that chat
    is in this file (a chat the CLI answered in memory is not)."""
    kept = memory_text(text)
    with store.transaction() as conn:
        same = conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE text = ? ORDER BY id LIMIT 1",
                            (kept,)).fetchone()
        if same is not None:
            return AddedMemory(memory_from_row(tuple(same)), False)
        count = int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
        if count >= MAX_MEMORIES:
            raise MemoryRefused(RefusalReason.FULL, count=count)
        if conversation_id is not None and conn.execute(
                "SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone() is None:
            conversation_id = None
        cursor = conn.execute("INSERT INTO memories (text, created, origin, conversation_id, enabled)"
                              " VALUES (?, ?, ?, ?, 1)", (kept, clock(), MemoryOrigin(origin).value, conversation_id))
        row = conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (cursor.lastrowid,)).fetchone()
    return AddedMemory(memory_from_row(tuple(row)), True)


def list_memories(store: HistoryFile) -> list[Memory]:
    """Every memory, enabled or not, oldest first."""
    with store.transaction() as conn:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM memories ORDER BY id").fetchall()
    return [memory_from_row(tuple(row)) for row in rows]


def memory_ids(store: HistoryFile) -> frozenset[int]:
    """The ids of every memory kept now."""
    with store.transaction() as conn:
        return frozenset(int(row[0]) for row in conn.execute("SELECT id FROM memories"))


def memories_by_ids(store: HistoryFile, ids: Iterable[int]) -> list[Memory]:
    """The memories with these ids that are still kept, oldest first (a forgotten one is left out)."""
    wanted = sorted(set(ids))
    found: list[Memory] = []
    with store.transaction() as conn:
        for start in range(0, len(wanted), _IDS_PER_QUERY):
            part = wanted[start:start + _IDS_PER_QUERY]
            rows = conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id IN ({','.join('?' * len(part))})"
                                " ORDER BY id", part).fetchall()
            found += [memory_from_row(tuple(row)) for row in rows]
    return found


def edit_memory(store: HistoryFile, memory_id: int, text: str) -> Memory:
    """Give a memory new words (its old words leave the search index and the file); KeyError if
    there is no such memory, MemoryRefused as add_memory."""
    kept = memory_text(text)
    with store.transaction() as conn:
        if conn.execute("UPDATE memories SET text = ? WHERE id = ?", (kept, memory_id)).rowcount == 0:
            raise KeyError(memory_id)
        conn.execute("INSERT INTO memory_search(memory_search) VALUES ('optimize')")
        row = conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)).fetchone()
    store.empty_log()
    return memory_from_row(tuple(row))


def set_memory_enabled(store: HistoryFile, memory_id: int, enabled: bool) -> Memory:
    """Turn a memory on or off (off: kept, not used); KeyError if there is no such memory."""
    with store.transaction() as conn:
        if conn.execute("UPDATE memories SET enabled = ? WHERE id = ?", (int(enabled), memory_id)).rowcount == 0:
            raise KeyError(memory_id)
        row = conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)).fetchone()
    return memory_from_row(tuple(row))


def remove_memories(store: HistoryFile, ids: Iterable[int] | None) -> list[int]:
    """Forget these memories (None: every one); the ids that were there.

    Forgotten means gone from the file too, not only from the table: the history overwrites what
    it deletes (secure_delete, history_file.py), the search index is merged so no segment keeps
    their words, and the write-ahead log (which holds copies of the pages it wrote) is emptied.
    """
    with store.transaction() as conn:
        if ids is None:
            gone = [int(row[0]) for row in conn.execute("SELECT id FROM memories ORDER BY id")]
            conn.execute("DELETE FROM memories")
        else:
            wanted = sorted(set(ids))
            gone = []
            for start in range(0, len(wanted), _IDS_PER_QUERY):
                part = wanted[start:start + _IDS_PER_QUERY]
                marks = ",".join("?" * len(part))
                gone += [int(row[0]) for row in conn.execute(f"SELECT id FROM memories WHERE id IN ({marks})", part)]
                conn.execute(f"DELETE FROM memories WHERE id IN ({marks})", part)
        if gone:
            conn.execute("INSERT INTO memory_search(memory_search) VALUES ('optimize')")
    if gone:
        store.empty_log()
    return sorted(gone)


# --- what the selection of a chat's memories reads ------------------------------------------------


def enabled_count(store: HistoryFile) -> int:
    """How many memories are on."""
    with store.transaction() as conn:
        return int(conn.execute("SELECT count(*) FROM memories WHERE enabled = 1").fetchone()[0])


def enabled_memories(store: HistoryFile) -> list[Memory]:
    """Every memory that is on, oldest first."""
    with store.transaction() as conn:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE enabled = 1 ORDER BY id").fetchall()
    return [memory_from_row(tuple(row)) for row in rows]


def best_matches(store: HistoryFile, words: Sequence[str], limit: int) -> list[Memory]:
    """The memories that are on and hold any of `words` (the tokenizer's stems), best BM25 first (the
    newer first among equals). Words found in more than half the memories are left out while another
    remains (_telling)."""
    if not words or limit <= 0:
        return []
    with store.transaction() as conn:
        telling = _telling(conn, list(words))
        match = " OR ".join('"' + word.replace('"', '""') + '"' for word in telling)
        # The index's best first, then their rows (the disabled ones left out after).
        rows = conn.execute(
            f"SELECT {', '.join('m.' + c.strip() for c in _COLUMNS.split(','))} FROM"
            " (SELECT rowid AS found, bm25(memory_search) AS score FROM memory_search WHERE memory_search MATCH ?"
            "  ORDER BY score LIMIT ?) JOIN memories AS m ON m.id = found"
            " WHERE m.enabled = 1 ORDER BY score, m.id DESC LIMIT ?",
            (match, 2 * limit, limit)).fetchall()
    return [memory_from_row(tuple(row)) for row in rows]


def newest_memories(store: HistoryFile, limit: int) -> list[Memory]:
    """The newest memories that are on, newest first."""
    with store.transaction() as conn:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE enabled = 1 ORDER BY id DESC LIMIT ?",
                            (limit,)).fetchall()
    return [memory_from_row(tuple(row)) for row in rows]


def _telling(conn: sqlite3.Connection, words: list[str]) -> list[str]:
    """`words` without those in more than _COMMON_SHARE of the memories, while another remains (a word the
    vocabulary does not hold as it is, its stem differing, is kept)."""
    if len(words) < 2:
        return words
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_vocab USING fts5vocab(main, memory_search, row)")
    total = int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
    kept = []
    for word in words:
        row = conn.execute("SELECT doc FROM temp.memory_vocab WHERE term = ?", (word,)).fetchone()
        if row is None or int(row[0]) <= total * _COMMON_SHARE:
            kept.append(word)
    return kept or words


# --- the memories' vectors (history format 10): made by the documents' embedding model ---------------


def memory_vectors_changes(store: HistoryFile) -> int:
    """A number that moves whenever the vectors selection reads change (a vector kept, replaced or gone, a
    memory turned on or off): the same number, the same vectors."""
    with store.transaction() as conn:
        return int(conn.execute("SELECT count FROM memory_vectors_changes WHERE id = 1").fetchone()[0])


def enabled_memory_vectors(store: HistoryFile, model: str) -> list[tuple[int, bytes]]:
    """(memory id, vector as little-endian float32 bytes) of every memory that is on and has a vector of `model`."""
    with store.transaction() as conn:
        return [(int(row[0]), bytes(row[1])) for row in conn.execute(
            "SELECT v.memory_id, v.vector FROM memory_vectors AS v JOIN memories AS m ON m.id = v.memory_id"
            " WHERE v.model = ? AND m.enabled = 1 ORDER BY v.memory_id", (model,))]


def memories_lacking_vectors(store: HistoryFile, model: str, limit: int) -> list[Memory]:
    """Up to `limit` memories with no vector of `model` (none yet, or another model's): those that are on
    first, the newest first, since those are the likeliest to be chosen."""
    with store.transaction() as conn:
        rows = conn.execute(
            f"SELECT {', '.join('m.' + c.strip() for c in _COLUMNS.split(','))} FROM memories AS m"
            " LEFT JOIN memory_vectors AS v ON v.memory_id = m.id AND v.model = ?"
            " WHERE v.memory_id IS NULL ORDER BY m.enabled DESC, m.id DESC LIMIT ?", (model, limit)).fetchall()
    return [memory_from_row(tuple(row)) for row in rows]


def keep_memory_vectors(store: HistoryFile, model: str, vectors: Sequence[tuple[int, str, bytes]]) -> int:
    """Keep `model`'s vector of each (memory id, the text it was made from, vector) whose memory still has
    that text (one edited or forgotten while it was made is left out); how many were kept."""
    kept = 0
    with store.transaction() as conn:
        for memory_id, text, vector in vectors:
            kept += conn.execute("INSERT OR REPLACE INTO memory_vectors (memory_id, model, vector)"
                                 " SELECT id, ?, ? FROM memories WHERE id = ? AND text = ?",
                                 (model, vector, memory_id, text)).rowcount
    return kept


# --- a damaged history's replacement ------------------------------------------------------------


def memory_rows(store: HistoryFile) -> list[tuple[Any, ...]]:
    """Every memory as a row of MEMORY_COLUMNS (a history kept in memory while the file was damaged)."""
    with store.transaction() as conn:
        return [tuple(row) for row in conn.execute(f"SELECT {_COLUMNS} FROM memories ORDER BY id")]


def restore_memories(store: HistoryFile, rows: Sequence[Sequence[Any]]) -> int:
    """Keep memories read from elsewhere (a damaged file's readable rows: MEMORY_COLUMNS) with their ids
    (None: a new one), times and chats (kept where that chat is here); how many. A row this code would
    not write, or one whose id or text is kept already, is left out."""
    kept = 0
    with store.transaction() as conn:
        chats = {int(row[0]) for row in conn.execute("SELECT id FROM conversations")}
        texts = {str(row[0]) for row in conn.execute("SELECT text FROM memories")}
        for row in rows:
            try:
                mid, text, created, origin, conversation_id, enabled = row
                memory = memory_from_row((0, memory_text(text), created, origin, None, enabled))
            except (TypeError, ValueError, MemoryRefused):
                continue
            if memory.text in texts or (mid is not None and not isinstance(mid, int)) or kept + len(texts) >= MAX_MEMORIES:
                continue
            conn.execute("INSERT OR IGNORE INTO memories (id, text, created, origin, conversation_id, enabled)"
                         " VALUES (?, ?, ?, ?, ?, ?)",
                         (mid, memory.text, memory.created, memory.origin.value,
                          conversation_id if conversation_id in chats else None, int(memory.enabled)))
            texts.add(memory.text)
            kept += 1
    return kept


# --- answers and chats ------------------------------------------------------------------------------


def record_memories_used(store: HistoryFile, message_id: int, ids: Sequence[int]) -> None:
    """Keep on an answer which memories it was given (their ids); KeyError if there is no such message."""
    with store.transaction() as conn:
        cursor = conn.execute("UPDATE messages SET memories = ? WHERE id = ?", (memory_ids_json(tuple(ids)), message_id))
        if cursor.rowcount == 0:
            raise KeyError(message_id)


def set_chat_memory(store: HistoryFile, conversation_id: int, on: bool) -> None:
    """Whether this chat's answers use memory; KeyError if there is no such chat. No activity: the chat
    keeps its place in the list."""
    with store.transaction() as conn:
        if conn.execute("UPDATE conversations SET memory = ? WHERE id = ?", (int(on), conversation_id)).rowcount == 0:
            raise KeyError(conversation_id)
