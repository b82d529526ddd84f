"""A chat's documents in the history: attached files on the user's messages, sources on answers and
collections on chats, stored, read back, searched by file name, migrated from format 5, repaired and copied."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.core.store import history_repair
from app.core.attachments import MAX_ATTACHED_CHARS, MAX_ATTACHMENTS, AttachedFile, AttachedSection, SourceRef
from app.core.conversation import Role
from app.core.store.history import HistoryStore
from app.core.store.history_schema import MIGRATIONS
from tests.core.conftest import FakeClock

REPORT = AttachedFile("/home/ana/Documents/Quarterly report.pdf", "pdf", 48_213,
                      (AttachedSection("Revenue rose 12 percent.", page=1),
                       AttachedSection("Costs fell in the north.", page=2, heading="Costs › Regions")),
                      note="")
NOTES = AttachedFile("C:\\Users\\ana\\notes.md", "markdown", 120, (AttachedSection("# Plan\nShip it."),),
                     note="read as Windows-1252")
SOURCES = (SourceRef(1, REPORT.path, 2, "Costs › Regions", "Costs fell in the north."),
           SourceRef(2, NOTES.path, None, None, "Ship it."))


def _chat_with_documents(store: HistoryStore) -> tuple[int, int, int]:
    chat = store.create_conversation("Report")
    question = store.add_message(chat.id, Role.USER, "What fell?", attachments=[REPORT, NOTES])
    answer = store.add_message(chat.id, Role.ASSISTANT, "Costs fell [1].")
    store.update_message(answer.id, sources=SOURCES)
    store.set_collections(chat.id, ["Work", "Taxes 2025"])
    return chat.id, question.id, answer.id


def _search_index_is_consistent(path: Path) -> bool:
    conn = sqlite3.connect(path)
    try:
        conn.execute("INSERT INTO message_search(message_search, rank) VALUES ('integrity-check', 1)")
        return True
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()


def test_documents_are_kept_and_read_back_after_a_restart(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        chat_id, question_id, answer_id = _chat_with_documents(store)
    with HistoryStore(db_path) as store:
        question, answer = store.messages(chat_id)
        assert question.attachments == (REPORT, NOTES) and question.sources == ()
        assert answer.sources == SOURCES and answer.attachments == ()
        assert store.get_message(question_id) == question and store.get_message(answer_id) == answer
        assert store.get_conversation(chat_id).collections == ("Work", "Taxes 2025")
        assert [c.collections for c in store.list_conversations()] == [("Work", "Taxes 2025")]
        assert question.attachments[0].name == "Quarterly report.pdf" and NOTES.name == "notes.md"


def test_collections_change_without_moving_the_chat_and_a_missing_chat_is_a_key_error(
        store: HistoryStore, clock: FakeClock) -> None:
    older = store.create_conversation("Older")
    store.add_message(older.id, Role.USER, "hi")
    clock.advance(10)
    newer = store.create_conversation("Newer", collections=("Work",))
    assert newer.collections == ("Work",)
    clock.advance(10)
    before = store.get_conversation(older.id).updated
    store.set_collections(older.id, ("Taxes",))
    assert store.get_conversation(older.id).updated == before
    assert [c.title for c in store.list_conversations()] == ["Newer", "Older"]
    store.set_collections(newer.id, ())
    assert store.get_conversation(newer.id).collections == ()
    with pytest.raises(KeyError):
        store.set_collections(9999, ["Work"])
    with pytest.raises(ValueError, match="twice"):
        store.set_collections(older.id, ["Work", "Work"])
    with pytest.raises(ValueError, match="not one text"):
        store.set_collections(older.id, "Work")
    assert store.get_conversation(older.id).collections == ("Taxes",)


def test_only_the_user_attaches_and_only_an_answer_has_sources(store: HistoryStore) -> None:
    chat = store.create_conversation()
    with pytest.raises(ValueError, match="only the user attaches"):
        store.add_message(chat.id, Role.ASSISTANT, "Here", attachments=[REPORT])
    question = store.add_message(chat.id, Role.USER, "Read this", attachments=[REPORT])
    with pytest.raises(ValueError, match="only an answer has sources"):
        store.update_message(question.id, sources=SOURCES)
    assert store.messages(chat.id) == [question]
    answer = store.add_message(chat.id, Role.ASSISTANT, "Done [1].")
    store.update_message(answer.id, sources=SOURCES[:1])
    store.update_message(answer.id, text="Done [1], streamed.")  # sources stay when other fields change
    assert store.get_message(answer.id).sources == SOURCES[:1]
    store.update_message(answer.id, sources=())
    assert store.get_message(answer.id).sources == ()


@pytest.mark.parametrize(("attached", "said"), [
    ([REPORT] * (MAX_ATTACHMENTS + 1), "at most 100"),
    ([AttachedFile("big.txt", "text", 1, (AttachedSection("x" * MAX_ATTACHED_CHARS), AttachedSection("y")))],
     "more than 5,000,000 characters"),
    ([AttachedFile("", "text", 1, ())], "path must not be empty"),
    ([AttachedFile("a.pdf", "pdf", -1, ())], "size must be a whole number"),
    ([AttachedFile("a.pdf", "pdf", 1, (AttachedSection("x", page=0),))], "page must be a whole number"),
])
def test_a_wrong_or_oversized_attachment_is_a_bug_and_nothing_is_written(
        store: HistoryStore, attached: list, said: str) -> None:
    chat = store.create_conversation()
    with pytest.raises(ValueError, match=said):
        store.add_message(chat.id, Role.USER, "Read this", attachments=attached)
    assert store.messages(chat.id) == []


def test_a_path_from_a_file_system_in_another_encoding_is_kept_readable(store: HistoryStore) -> None:
    chat = store.create_conversation()
    odd = AttachedFile("/tmp/caf\udce9.txt", "text", 3, (AttachedSection("tea"),))
    kept = store.add_message(chat.id, Role.USER, "Read this", attachments=[odd])
    assert kept.attachments[0].path == "/tmp/caf\ufffd.txt"


def test_search_finds_a_chat_by_an_attached_files_name_not_by_its_text_or_folder(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        chat_id = _chat_with_documents(store)[0]
        other = store.create_conversation("Other").id
        store.add_message(other, Role.USER, "Nothing attached here, just north winds.")
        assert [c.id for c in store.search_conversations("quarterly REPORT")] == [chat_id]
        assert [c.id for c in store.search_conversations("notes.md")] == [chat_id]
        assert store.search_conversations("revenue rose") == []  # the file's text
        assert store.search_conversations("Documents") == []  # a folder of its path
        # The name stays found after the question's text is edited (the copy is made again).
        question = store.messages(chat_id)[0]
        store.update_message(question.id, text="What changed?")
        assert [c.id for c in store.search_conversations("quarterly")] == [chat_id]
        assert [c.id for c in store.search_conversations("what changed")] == [chat_id]
    assert _search_index_is_consistent(db_path)


def test_documents_another_program_wrote_wrong_are_left_out(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        chat_id, question_id, answer_id = _chat_with_documents(store)
    other = sqlite3.connect(db_path)
    with other:
        other.execute("UPDATE messages SET attachments = '[{\"path\": 5}]' WHERE id = ?", (question_id,))
        other.execute("UPDATE messages SET sources = 'not json' WHERE id = ?", (answer_id,))
        other.execute("UPDATE conversations SET collections = '{\"a\": 1}' WHERE id = ?", (chat_id,))
        # Sources on a question: no answer, so not read.
        other.execute("UPDATE messages SET sources = ? WHERE id = ?",
                      (json.dumps([{"number": 1, "path": "a", "page": None, "heading": None, "text": "t"}]),
                       question_id))
    other.close()
    with HistoryStore(db_path) as store:
        question, answer = store.messages(chat_id)
        assert (question.text, question.attachments, question.sources) == ("What fell?", (), ())
        assert (answer.text, answer.sources) == ("Costs fell [1].", ())
        assert store.get_conversation(chat_id).collections == ()


def _write_format_5_file(path: Path) -> None:
    """A history as format 5 (Kestrel before documents in chats) writes it."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for migration in MIGRATIONS[:5]:
            migration(conn)
        conn.execute("PRAGMA user_version = 5")
        conn.execute("INSERT INTO conversations (title, created, updated, system_prompt, settings, model)"
                     " VALUES ('Old chat', 1.0, 3.0, 'Be brief.', '{\"temperature\": 0.5}', NULL)")
        for role, text in (("user", "Where is the report?"), ("assistant", "In the drawer.")):
            conn.execute("INSERT INTO messages (conversation_id, role, text, created, state, folded)"
                         " VALUES (1, ?, ?, 2.0, 'complete', ?)", (role, text, text.casefold()))
    finally:
        conn.close()


def test_a_format_5_history_keeps_everything_and_its_chats_gain_documents(db_path: Path) -> None:
    _write_format_5_file(db_path)
    with HistoryStore(db_path) as store:
        [chat] = store.list_conversations()
        assert (chat.title, chat.system_prompt, chat.settings.temperature, chat.collections) == (
            "Old chat", "Be brief.", 0.5, ())
        question, answer = store.messages(chat.id)
        assert [(m.text, m.attachments, m.sources) for m in (question, answer)] == [
            ("Where is the report?", (), ()), ("In the drawer.", (), ())]
        assert [c.id for c in store.search_conversations("the drawer")] == [chat.id]
        store.set_collections(chat.id, ["Work"])
        added = store.add_message(chat.id, Role.USER, "This one", attachments=[REPORT])
        assert store.get_message(added.id).attachments == (REPORT,)
        assert [c.id for c in store.search_conversations("quarterly")] == [chat.id]
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 10
    finally:
        conn.close()
    assert _search_index_is_consistent(db_path)


def test_recovering_a_history_keeps_its_documents(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        chat_id, question_id, answer_id = _chat_with_documents(store)
        before = store.messages(chat_id)
    done = history_repair.replace_damaged(db_path, recover=True)
    assert (done.conversations, done.messages) == (1, 2)
    with HistoryStore(db_path) as store:
        assert store.messages(chat_id) == before
        assert store.get_conversation(chat_id).collections == ("Work", "Taxes 2025")
        assert [c.id for c in store.search_conversations("quarterly")] == [chat_id]
    assert _search_index_is_consistent(db_path)


def test_a_copied_chat_keeps_its_documents(db_path: Path) -> None:
    with HistoryStore(Path(":memory:")) as memory, HistoryStore(db_path) as store:
        chat_id = _chat_with_documents(memory)[0]
        carried = history_repair.copy_conversations(memory, store)[chat_id]
        assert store.get_conversation(carried).collections == ("Work", "Taxes 2025")
        assert [(m.attachments, m.sources) for m in store.messages(carried)] == [
            (m.attachments, m.sources) for m in memory.messages(chat_id)]


def test_deleting_from_a_question_takes_its_files_with_it(store: HistoryStore) -> None:
    chat_id, question_id, _ = _chat_with_documents(store)
    assert store.delete_messages_from(chat_id, question_id) == 2
    assert store.search_conversations("quarterly") == []
