"""Tests for the history file itself: migrations, versions, and the user's-machine errors."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.core.store import history_file
from app.core.conversation import Role
from app.core.store.history import HistoryError, HistoryStore
from app.core.store.history_schema import MIGRATIONS


def _user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def _columns(path: Path, table: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
    finally:
        conn.close()


def _add_pinned_column(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")


def test_new_file_gets_the_current_schema(db_path: Path) -> None:
    HistoryStore(db_path).close()
    assert _user_version(db_path) == len(history_file.MIGRATIONS) == 10
    assert _columns(db_path, "messages") == [
        "id", "conversation_id", "role", "text", "created", "state", "stats", "folded", "thinking", "parts",
        "attachments", "sources", "memories",
    ]
    assert _columns(db_path, "conversations")[-3:] == ["collections", "memory", "project_id"]
    assert _columns(db_path, "memories") == ["id", "text", "created", "origin", "conversation_id", "enabled"]
    assert _columns(db_path, "projects") == ["id", "name", "instructions", "model", "tools", "collections", "memory",
                                             "created", "updated"]


def test_a_version_2_history_keeps_its_messages_and_gains_thinking(db_path: Path) -> None:
    conn = sqlite3.connect(db_path)
    for migration in MIGRATIONS[:2]:
        migration(conn)
    conn.execute("PRAGMA user_version = 2")
    conn.execute("INSERT INTO conversations (title, created, updated, system_prompt, settings)"
                 " VALUES ('Old', 1, 1, '', '{}')")
    conn.execute("INSERT INTO messages (conversation_id, role, text, created, state, folded)"
                 " VALUES (1, 'assistant', 'Kept', 1, 'complete', 'kept')")
    conn.commit()
    conn.close()
    store = HistoryStore(db_path)
    try:
        [message] = store.messages(1)
        assert (message.text, message.thinking) == ("Kept", "")
        store.update_message(message.id, thinking="Because.")
        assert store.get_message(message.id).thinking == "Because."
    finally:
        store.close()
    assert _user_version(db_path) == len(MIGRATIONS)


def test_empty_version_zero_file_is_migrated(db_path: Path) -> None:
    sqlite3.connect(db_path).close()
    assert db_path.exists() and _user_version(db_path) == 0
    with HistoryStore(db_path) as store:
        conversation = store.create_conversation("works")
    assert _user_version(db_path) == len(MIGRATIONS)
    assert conversation.title == "works"


def test_older_file_is_migrated_forward_keeping_its_data(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with HistoryStore(db_path) as store:
        conversation = store.create_conversation("from v1")
        message = store.add_message(conversation.id, Role.USER, "hello from v1")
        conversation = store.get_conversation(conversation.id)
    # Kestrel's next release appends a migration; today's file must come up to it.
    monkeypatch.setattr(history_file, "MIGRATIONS", [*MIGRATIONS, _add_pinned_column])
    with HistoryStore(db_path) as store:
        assert store.get_conversation(conversation.id) == conversation
        assert store.messages(conversation.id) == [message]
    assert _user_version(db_path) == len(MIGRATIONS) + 1
    assert "pinned" in _columns(db_path, "conversations")


def test_failed_migration_leaves_the_file_at_its_old_version(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    HistoryStore(db_path).close()

    def broken(conn: sqlite3.Connection) -> None:
        _add_pinned_column(conn)
        raise RuntimeError("bug in migration")

    monkeypatch.setattr(history_file, "MIGRATIONS", [*MIGRATIONS, broken])
    with pytest.raises(RuntimeError, match="bug in migration"):
        HistoryStore(db_path)
    assert _user_version(db_path) == len(MIGRATIONS)
    assert "pinned" not in _columns(db_path, "conversations")


def _write_version_1_file(path: Path) -> None:
    """A history as Kestrel's first release left it: messages, no search index."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        MIGRATIONS[0](conn)
        conn.execute("PRAGMA user_version = 1")
        conn.execute(
            "INSERT INTO conversations (id, title, created, updated, settings)"
            " VALUES (1, 'Berlin', 1.0, 1.0, '{}'), (2, 'Athens', 2.0, 2.0, '{}')"
        )
        conn.executemany(
            "INSERT INTO messages (conversation_id, role, text, created, state)"
            " VALUES (?, 'user', ?, 1.0, 'complete')",
            [(1, "Die STRASSE ist lang"), (1, "ok"), (2, "Η ΟΔΟΣ είναι μακριά")],
        )
    finally:
        conn.close()


def _search_index_is_consistent(path: Path) -> bool:
    conn = sqlite3.connect(path)
    try:
        # rank 1: compare the index with messages.folded too, not only with itself.
        conn.execute(
            "INSERT INTO message_search(message_search, rank) VALUES ('integrity-check', 1)"
        )
        return True
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()


def test_version_1_file_with_messages_becomes_searchable(db_path: Path) -> None:
    _write_version_1_file(db_path)
    with HistoryStore(db_path) as store:
        assert [c.id for c in store.search_conversations("straße")] == [1]
        assert [c.id for c in store.search_conversations("οδος")] == [2]
        assert [c.id for c in store.search_conversations("OK")] == [1]
        with store.transaction() as conn:
            indexed = conn.execute(
                "SELECT rowid FROM message_search WHERE message_search MATCH '\"strasse\"'"
            ).fetchall()
        assert [row[0] for row in indexed] == [1]
        assert [m.text for m in store.messages(1)] == ["Die STRASSE ist lang", "ok"]
    assert _user_version(db_path) == len(MIGRATIONS)
    assert _search_index_is_consistent(db_path)


def test_migration_needs_an_sqlite_with_trigram(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_version_1_file(db_path)
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 33, 0))
    with pytest.raises(RuntimeError, match="needs SQLite 3.34.0"):
        HistoryStore(db_path)
    assert _user_version(db_path) == 1
    assert "folded" not in _columns(db_path, "messages")


def test_other_programs_can_still_write_messages(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        conversation = store.create_conversation()
        doomed = store.add_message(conversation.id, Role.USER, "written by Kestrel")
    # A program without Kestrel's SQL functions, such as a DB browser: the search
    # triggers must not stop it writing.
    other = sqlite3.connect(db_path)
    try:
        with other:
            other.execute(
                "INSERT INTO messages (conversation_id, role, text, created, state)"
                " VALUES (?, 'user', 'Added BY HAND', 2.0, 'complete')",
                (conversation.id,),
            )
            other.execute("DELETE FROM messages WHERE id = ?", (doomed.id,))
    finally:
        other.close()
    assert _search_index_is_consistent(db_path)
    with HistoryStore(db_path) as store:
        assert [c.id for c in store.search_conversations("by hand")] == [conversation.id]
        assert store.search_conversations("by kestrel") == []
    assert _search_index_is_consistent(db_path)


def test_file_from_a_newer_kestrel_is_refused(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        store.create_conversation("written by v1")
    newer = len(history_file.MIGRATIONS) + 1
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {newer}")
    conn.close()
    with pytest.raises(HistoryError, match="newer version of Kestrel") as caught:
        HistoryStore(db_path)
    assert "Update Kestrel" in str(caught.value)
    assert _user_version(db_path) == newer


def test_file_that_is_not_a_database_says_what_to_do(db_path: Path) -> None:
    db_path.write_bytes(b"These are my notes, not a database.\n" * 200)
    with pytest.raises(HistoryError, match="damaged or is not a Kestrel history") as caught:
        HistoryStore(db_path)
    assert "leaves the file as it is" in str(caught.value)
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)


def test_folder_that_cannot_be_made_says_what_to_do(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the data folder should be")
    with pytest.raises(HistoryError, match="cannot create the folder"):
        HistoryStore(blocker / "history.sqlite3")


def test_database_busy_in_another_program(db_path: Path) -> None:
    with HistoryStore(db_path, busy_timeout=0.1) as store:
        conversation = store.create_conversation()
        other = sqlite3.connect(db_path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(HistoryError, match="in use by another program"):
                store.add_message(conversation.id, Role.USER, "blocked")
            other.execute("ROLLBACK")
        finally:
            other.close()
        # Once the other program lets go, the store works again.
        assert store.add_message(conversation.id, Role.USER, "now").text == "now"


def test_disk_full_is_reported_and_rolled_back(store: HistoryStore) -> None:
    conversation = store.create_conversation()
    kept = store.add_message(conversation.id, Role.USER, "small")
    with store.transaction() as conn:
        # A page limit at the current size makes SQLite itself report SQLITE_FULL.
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(HistoryError, match="is full. Free some space"):
        store.add_message(conversation.id, Role.ASSISTANT, "x" * 1_000_000)
    assert store.messages(conversation.id) == [kept]


def test_programming_errors_are_not_disguised(store: HistoryStore) -> None:
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        with store.transaction() as conn:
            conn.execute("SELECT * FROM no_such_table")


def _is_writable(path: Path) -> bool:
    try:
        with open(path, "r+b"):
            return True
    except PermissionError:
        return False


@contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """Make `path` really read-only for this process, or skip the test.

    chmod is enough for a normal user and on Windows; root ignores it, so there the
    file is made immutable with chattr where the file system allows.
    """
    mode = path.stat().st_mode
    path.chmod(0o444)
    immutable = False
    if _is_writable(path) and shutil.which("chattr"):
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
        immutable = done.returncode == 0
    try:
        if _is_writable(path):
            pytest.skip("cannot make a file read-only here (root without chattr)")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        path.chmod(mode)


def test_read_only_file_says_what_to_do(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        conversation = store.create_conversation()
        kept = store.add_message(conversation.id, Role.USER, "written before")
    assert not any(p.name.endswith(("-wal", "-shm")) for p in db_path.parent.iterdir())
    with _read_only(db_path):
        with pytest.raises(HistoryError, match="not read-only") as caught:
            store = HistoryStore(db_path)
            try:
                # What the app does at start-up, then a user's message.
                store.recover_interrupted()
                store.add_message(conversation.id, Role.USER, "cannot write")
            finally:
                store.close()
        assert str(db_path) in str(caught.value)
    with HistoryStore(db_path) as store:
        assert store.messages(conversation.id) == [kept]
    assert os.access(db_path, os.W_OK)
