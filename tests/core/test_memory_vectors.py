"""The memories' vectors in the history (format 10): kept only for the text they were made from, gone with a
forgotten or edited memory, a change counter for selection's copy, and a format 9 file migrated with its memories."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.core.memories import MemoryOrigin
from app.core.store.history import HistoryStore
from app.core.store.history_schema import MIGRATIONS
from app.core.store.memories import (add_memory, edit_memory, enabled_memory_vectors, keep_memory_vectors,
                                     list_memories, memories_lacking_vectors, memory_vectors_changes,
                                     remove_memories, set_memory_enabled)

MODEL = "all-MiniLM-L6-v2:0123456789ab"
VECTOR = bytes(range(16))


@pytest.fixture
def store(tmp_path: Path):
    with HistoryStore(tmp_path / "history.sqlite3") as opened:
        yield opened


def _vector_rows(store: HistoryStore) -> list[tuple[int, str]]:
    with store.transaction() as conn:
        return [(int(row[0]), str(row[1])) for row in conn.execute("SELECT memory_id, model FROM memory_vectors")]


def _three(store: HistoryStore) -> list[int]:
    texts = ("My daughter is called Ada.", "I write Python at work.", "I prefer short answers.")
    return [add_memory(store, text, MemoryOrigin.HAND).memory.id for text in texts]


def test_a_vector_is_kept_for_the_text_it_was_made_from_and_read_for_the_memories_that_are_on(store) -> None:
    ada, work, short = _three(store)
    assert [m.id for m in memories_lacking_vectors(store, MODEL, 10)] == [short, work, ada], "newest first"
    before = memory_vectors_changes(store)
    assert keep_memory_vectors(store, MODEL, [(ada, "My daughter is called Ada.", VECTOR),
                                              (work, "I wrote Perl once.", VECTOR)]) == 1, "the text changed since"
    assert memory_vectors_changes(store) > before
    assert enabled_memory_vectors(store, MODEL) == [(ada, VECTOR)]
    assert enabled_memory_vectors(store, "another:model") == []
    assert [m.id for m in memories_lacking_vectors(store, MODEL, 10)] == [short, work]
    assert [m.id for m in memories_lacking_vectors(store, "another:model", 1)] == [short]
    set_memory_enabled(store, short, False)
    assert [m.id for m in memories_lacking_vectors(store, MODEL, 10)] == [work, short], "those that are on first"
    counted = memory_vectors_changes(store)
    set_memory_enabled(store, ada, False)
    assert enabled_memory_vectors(store, MODEL) == [] and memory_vectors_changes(store) > counted


def test_another_models_vector_is_replaced_not_added(store) -> None:
    ada = _three(store)[0]
    keep_memory_vectors(store, "old:model", [(ada, "My daughter is called Ada.", VECTOR)])
    keep_memory_vectors(store, MODEL, [(ada, "My daughter is called Ada.", VECTOR[::-1])])
    assert _vector_rows(store) == [(ada, MODEL)]
    assert enabled_memory_vectors(store, MODEL) == [(ada, VECTOR[::-1])]


def test_forgetting_or_editing_a_memory_takes_its_vector_with_it(store) -> None:
    ada, work, short = _three(store)
    keep_memory_vectors(store, MODEL, [(ada, "My daughter is called Ada.", VECTOR),
                                       (work, "I write Python at work.", VECTOR),
                                       (short, "I prefer short answers.", VECTOR)])
    counted = memory_vectors_changes(store)
    remove_memories(store, [ada])
    assert [row[0] for row in _vector_rows(store)] == [work, short]
    assert memory_vectors_changes(store) > counted
    counted = memory_vectors_changes(store)
    edit_memory(store, work, "I write Rust at work.")
    assert [row[0] for row in _vector_rows(store)] == [short], "new words: the old vector is not theirs"
    assert memory_vectors_changes(store) > counted
    assert [m.id for m in memories_lacking_vectors(store, MODEL, 10)] == [work]
    remove_memories(store, None)
    assert _vector_rows(store) == []


def test_a_forgotten_memorys_vector_leaves_no_copy_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    marker = b"KESTREL-VECTOR-MARKER-" * 8
    with HistoryStore(path) as store:
        ada = add_memory(store, "My daughter is called Ada.", MemoryOrigin.HAND).memory.id
        keep_memory_vectors(store, MODEL, [(ada, "My daughter is called Ada.", marker)])
        remove_memories(store, [ada])
        assert marker not in path.read_bytes() + Path(f"{path}-wal").read_bytes()


def test_a_format_9_history_gains_memory_vectors_and_keeps_its_memories(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:9]:
        migration(conn)
    conn.execute("PRAGMA user_version = 9")
    conn.execute("INSERT INTO memories (text, created, origin, enabled) VALUES ('My daughter is called Ada.', 1, "
                 "'hand', 1), ('I write Python at work.', 2, 'cli', 0)")
    conn.commit()
    conn.close()
    with HistoryStore(path) as store:
        assert [(m.id, m.text, m.enabled) for m in list_memories(store)] == \
            [(1, "My daughter is called Ada.", True), (2, "I write Python at work.", False)]
        assert memory_vectors_changes(store) == 0 and _vector_rows(store) == []
        assert [m.id for m in memories_lacking_vectors(store, MODEL, 10)] == [1, 2]
        assert keep_memory_vectors(store, MODEL, [(1, "My daughter is called Ada.", VECTOR)]) == 1
        remove_memories(store, [1])
        assert _vector_rows(store) == []
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 10
