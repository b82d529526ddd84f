"""Drafts in the history file: kept per chat and for the new chat, forgotten with their chat,
and the version-4 migration that brings them (and clears the models nobody chose)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.core.store.drafts import read_drafts, write_drafts
from app.core.store.history import HistoryStore
from app.core.store.history_schema import MIGRATIONS


def test_drafts_are_kept_per_chat_and_for_the_new_chat(store: HistoryStore) -> None:
    first = store.create_conversation("First")
    second = store.create_conversation("Second")
    write_drafts(store, {first.id: "half a thought", None: "a new chat's start", second.id: "x"})
    write_drafts(store, {second.id: ""})  # sent, or cleared: forgotten
    assert read_drafts(store) == {first.id: "half a thought", None: "a new chat's start"}
    write_drafts(store, {first.id: "the latest text wins"})
    assert read_drafts(store)[first.id] == "the latest text wins"


def test_a_deleted_chat_takes_its_draft_with_it(store: HistoryStore) -> None:
    chat = store.create_conversation("Doomed")
    write_drafts(store, {chat.id: "never sent"})
    store.delete_conversation(chat.id)
    assert read_drafts(store) == {}
    write_drafts(store, {chat.id: "a late write for the deleted chat"})
    assert read_drafts(store) == {}, "a draft for a chat that is gone is not kept"


def test_drafts_survive_closing_the_file(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        chat = store.create_conversation("Kept")
        write_drafts(store, {chat.id: "ünïcode and\nnew lines", None: "new"})
    with HistoryStore(db_path) as store:
        assert read_drafts(store) == {chat.id: "ünïcode and\nnew lines", None: "new"}


def test_a_version_3_history_gains_drafts_and_its_chats_use_the_default_model(db_path: Path) -> None:
    conn = sqlite3.connect(db_path)
    for migration in MIGRATIONS[:3]:
        migration(conn)
    conn.execute("PRAGMA user_version = 3")
    # Version 3 wrote the model loaded when a chat was made, which nobody chose.
    conn.execute("INSERT INTO conversations (title, created, updated, system_prompt, settings, model)"
                 " VALUES ('Old', 1, 1, '', '{}', 'tiny-model')")
    conn.commit()
    conn.close()
    with HistoryStore(db_path) as store:
        [old] = store.list_conversations()
        assert old.title == "Old" and old.model is None
        write_drafts(store, {old.id: "draft in a migrated file"})
        assert read_drafts(store) == {old.id: "draft in a migrated file"}
        store.choose_model(old.id, "chosen-model")
        assert store.get_conversation(old.id).model == "chosen-model"
        assert store.get_conversation(old.id).updated == 1, "choosing a model is not activity"
        store.choose_model(old.id, None)
        assert store.get_conversation(old.id).model is None
