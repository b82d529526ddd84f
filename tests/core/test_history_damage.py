"""A damaged history file: found before anything writes, kept unchanged, set aside, recovered."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from app.core.store import history, history_repair
from app.core.answer_stats import AnswerStats
from app.core.conversation import MessageState, Role
from app.core.store.history import HistoryStore
from tests.core.damaged_history import (CONVERSATIONS, MESSAGES_EACH, damage_in_use, damaged_history, digest,
                                        write_history)

NOT_A_DATABASE = b"These are my notes, not a database.\n" * 200


def _counts(path: Path) -> tuple[int, int]:
    with HistoryStore(path) as store:
        conversations = store.list_conversations()
        return len(conversations), sum(len(store.messages(c.id)) for c in conversations)


def _healthy(path: Path) -> bool:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def _beside(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


@pytest.mark.parametrize("page", [2, 5])
def test_a_damaged_page_is_found_before_anything_writes(db_path: Path, page: int) -> None:
    damaged_history(db_path, page)
    before = digest(db_path)
    with pytest.raises(history.HistoryDamaged, match="damaged") as caught:
        HistoryStore(db_path)
    assert caught.value.path == db_path and caught.value.detail
    assert digest(db_path) == before
    assert _beside(db_path) == [db_path.name]  # no WAL or index left next to it either


def test_a_file_that_is_not_a_database_is_found_and_left_alone(db_path: Path) -> None:
    db_path.write_bytes(NOT_A_DATABASE)
    with pytest.raises(history.HistoryDamaged, match="damaged or is not a Kestrel history") as caught:
        HistoryStore(db_path)
    assert "not a database" in caught.value.detail
    assert db_path.read_bytes() == NOT_A_DATABASE


def test_an_empty_file_is_a_new_history_not_damage(db_path: Path) -> None:
    # SQLite starts every new database as an empty file, and there is nothing in it to
    # lose: it opens as a new history, as it always did.
    db_path.write_bytes(b"")
    history.check_damage(db_path)
    assert _counts(db_path) == (0, 0) and _healthy(db_path)


def test_damage_found_while_in_use_is_history_damaged(db_path: Path) -> None:
    write_history(db_path)
    with HistoryStore(db_path) as store:
        store.recover_interrupted()  # reads (and caches) every message
        damage_in_use(db_path, 4)  # the messages table's root
        with pytest.raises(history.HistoryDamaged):
            store.messages(1)


def test_a_fresh_history_keeps_the_damaged_file_aside_unchanged(db_path: Path) -> None:
    damaged_history(db_path, 2)
    before = digest(db_path)
    done = history_repair.replace_damaged(db_path, recover=False, clock=lambda: 1_700_000_000.0)
    assert done.aside is not None and done.aside.parent == db_path.parent
    assert done.aside.name.startswith("history.damaged-2023111") and done.aside.suffix == ".sqlite3"
    assert digest(done.aside) == before
    assert _counts(db_path) == (0, 0) and _healthy(db_path)
    assert _beside(db_path) == sorted([db_path.name, done.aside.name])
    # A second damaged file in the same second gets a name of its own.
    db_path.write_bytes(NOT_A_DATABASE)
    again = history_repair.replace_damaged(db_path, recover=False, clock=lambda: 1_700_000_000.0)
    assert again.aside != done.aside and again.aside is not None and again.aside.read_bytes() == NOT_A_DATABASE


@pytest.mark.parametrize("page", [2, 5])
def test_recovery_copies_every_row_sqlite_can_still_read(db_path: Path, page: int) -> None:
    damaged_history(db_path, page)
    before = digest(db_path)
    done = history_repair.replace_damaged(db_path, recover=True)
    assert done.aside is not None and digest(done.aside) == before
    # Page 5 is an index: every row is still there. Page 2 held every conversation row:
    # their messages are found, each chat titled from its first message.
    assert (done.conversations, done.messages) == (CONVERSATIONS, CONVERSATIONS * MESSAGES_EACH)
    assert _counts(db_path) == (CONVERSATIONS, CONVERSATIONS * MESSAGES_EACH) and _healthy(db_path)
    with HistoryStore(db_path) as store:
        titles = {c.title for c in store.list_conversations()}
        expected = "chat 7" if page == 5 else "message 0 of chat 7 " + "x" * 27 + "…"
        assert expected in titles
        assert len(store.search_conversations("of chat 7 x")) == 1  # the search index was rebuilt
        first = store.messages(1)[0]
        assert (first.role, first.state) == (Role.USER, MessageState.COMPLETE)


def test_recovering_a_file_that_is_not_a_database_gives_an_empty_history(db_path: Path) -> None:
    db_path.write_bytes(NOT_A_DATABASE)
    done = history_repair.replace_damaged(db_path, recover=True)
    assert (done.conversations, done.messages) == (0, 0)
    assert done.aside is not None and done.aside.read_bytes() == NOT_A_DATABASE
    assert _counts(db_path) == (0, 0)


def test_chats_kept_in_memory_move_into_the_new_history(db_path: Path) -> None:
    damaged_history(db_path, 5)
    with HistoryStore(Path(":memory:")) as memory:
        chat = memory.create_conversation("written meanwhile")
        memory.add_message(chat.id, Role.USER, "hello")
        memory.add_message(chat.id, Role.ASSISTANT, "hi", state=MessageState.INTERRUPTED, stats=AnswerStats(tokens=1))
        done = history_repair.replace_damaged(db_path, recover=True, carry=memory)
    new_id = done.carried[chat.id]
    assert new_id > CONVERSATIONS  # after the recovered ones, never on top of one
    with HistoryStore(db_path) as store:
        assert store.list_conversations()[0].title == "written meanwhile"
        answer = store.messages(new_id)[-1]
        assert (answer.text, answer.state, answer.stats) == ("hi", MessageState.INTERRUPTED, AnswerStats(tokens=1))


def test_a_refused_rename_leaves_the_damaged_file_where_it_was(db_path: Path, monkeypatch) -> None:
    damaged_history(db_path, 2)
    before = digest(db_path)

    def refuse(*_args: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(history.HistoryError, match="still there, unchanged"):
        history_repair.replace_damaged(db_path, recover=True)
    assert digest(db_path) == before and _beside(db_path) == [db_path.name]
