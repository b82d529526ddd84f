"""A turn's tool calls and results kept as its parts: stored, read back, searched, checked,
carried through a repair, and the format-5 migration of a history written by format 4."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.core.store import history_repair
from app.core.answer_stats import AnswerStats
from app.core.conversation import Message, MessageState, Role, TextPart, ToolCallPart, ToolResultPart, joined_text
from app.core.store.drafts import read_drafts, write_drafts
from app.core.store.history import HistoryStore
from app.core.store.history_schema import MIGRATIONS
from app.core.message_parts import SEARCHED_RESULT_CHARS, ToolRound, tool_rounds
from tests.core.damaged_history import damage_page, write_history

CALL = ToolCallPart("call_1", "time", "get_current_time", '{"timezone":"Europe/Paris"}')
RESULT = ToolResultPart("call_1", '{"datetime": "2026-12-01T14:05:00+01:00"}')
PARTS = (TextPart("Let me look."), CALL, RESULT, TextPart("It is 14:05 in Paris."))


def _answered(store: HistoryStore) -> tuple[int, Message]:
    chat = store.create_conversation("Time")
    store.add_message(chat.id, Role.USER, "What time is it in Paris?")
    return chat.id, store.add_message(chat.id, Role.ASSISTANT, joined_text(PARTS), parts=PARTS)


def _search_index_is_consistent(path: Path) -> bool:
    conn = sqlite3.connect(path)
    try:
        conn.execute("INSERT INTO message_search(message_search, rank) VALUES ('integrity-check', 1)")
        return True
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()


def test_parts_are_kept_in_order_and_text_stays_the_visible_answer(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        chat_id, answer = _answered(store)
        assert answer.parts == PARTS and answer.text == "Let me look.\n\nIt is 14:05 in Paris."
    with HistoryStore(db_path) as store:
        question, again = store.messages(chat_id)
        assert again == answer == store.get_message(answer.id)
        assert question.parts == ()


def test_an_answer_streams_its_parts_in_and_text_alone_keeps_them(store: HistoryStore) -> None:
    chat = store.create_conversation()
    answer = store.add_message(chat.id, Role.ASSISTANT, "", state=MessageState.STREAMING)
    store.update_message(answer.id, text="Let me look.", parts=PARTS[:2])
    store.update_message(answer.id, parts=PARTS[:3])
    store.update_message(answer.id, text="Let me look.\n\nIt is", state=MessageState.INTERRUPTED,
                         stats=AnswerStats(tokens=9))
    stopped = store.get_message(answer.id)
    assert (stopped.parts, stopped.text, stopped.state) == (PARTS[:3], "Let me look.\n\nIt is",
                                                            MessageState.INTERRUPTED)
    store.update_message(answer.id, parts=())
    assert store.get_message(answer.id).parts == ()


def test_search_finds_a_calls_name_and_arguments_and_a_results_text(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        chat_id, answer = _answered(store)
        store.create_conversation("Other")
        for query in ("get_current", "europe/paris", "2026-12-01T14", "14:05 in PARIS"):
            assert [c.id for c in store.search_conversations(query)] == [chat_id], query
        store.update_message(answer.id, text="Changed answer")  # the parts stay searchable
        assert [c.id for c in store.search_conversations("2026-12-01T14")] == [chat_id]
        assert store.search_conversations("14:05 in paris") == []
        store.update_message(answer.id, parts=(TextPart("Changed answer"),))
        assert store.search_conversations("get_current_time") == []
        assert [c.id for c in store.search_conversations("changed")] == [chat_id]
    assert _search_index_is_consistent(db_path)


@pytest.mark.parametrize(("parts", "said"), [
    ((ToolResultPart("call_9", "orphan"),), "no call made before it"),
    ((CALL, CALL), "two calls with the id 'call_1'"),
    ((CALL, RESULT, RESULT), "two results for the call 'call_1'"),
    ((ToolCallPart("c", "time", "now", "[1, 2]"),), "arguments must be the text of a JSON object"),
    ((ToolCallPart("c", "time", "now", "{not json"),), "arguments must be the text of a JSON object"),
    ((ToolCallPart("", "time", "now", "{}"),), "call_id must not be empty"),
    ((ToolCallPart("c", "time", "now\nrm -rf", "{}"),), "name must be one line"),
    ((ToolCallPart("c", "time", "n" * 1001, "{}"),), "name is 1,001 characters long"),
])
def test_a_wrong_part_is_a_bug_and_nothing_is_written(store: HistoryStore, parts: tuple, said: str) -> None:
    chat = store.create_conversation()
    with pytest.raises(ValueError, match=said):
        store.add_message(chat.id, Role.ASSISTANT, "x", parts=parts)
    assert store.messages(chat.id) == []
    answer = store.add_message(chat.id, Role.ASSISTANT, "kept", parts=PARTS)
    with pytest.raises(ValueError, match=said):
        store.update_message(answer.id, text="lost", parts=parts)
    assert store.get_message(answer.id) == answer


def test_only_an_answer_has_parts(store: HistoryStore) -> None:
    chat = store.create_conversation()
    with pytest.raises(ValueError, match="a user message has no parts"):
        store.add_message(chat.id, Role.USER, "hi", parts=PARTS)
    question = store.add_message(chat.id, Role.USER, "hi")
    with pytest.raises(ValueError, match="only an answer has parts"):
        store.update_message(question.id, parts=PARTS)
    assert store.get_message(question.id).parts == ()


def test_text_utf8_cannot_hold_in_a_result_is_kept_as_a_replacement_character(store: HistoryStore) -> None:
    chat = store.create_conversation()
    parts = (CALL, ToolResultPart("call_1", "bad \ud800 byte", is_error=True))
    answer = store.add_message(chat.id, Role.ASSISTANT, "", parts=parts)
    assert answer.parts[1] == ToolResultPart("call_1", "bad \ufffd byte", is_error=True)


def test_parts_another_program_wrote_wrong_are_left_out_and_the_text_kept(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        chat_id, answer = _answered(store)
    other = sqlite3.connect(db_path)
    with other:
        other.execute("UPDATE messages SET parts = '[{\"type\": \"video\"}]' WHERE id = ?", (answer.id,))
        # A row without the search copy, with parts: folded on Kestrel's next start, parts too.
        other.execute("INSERT INTO messages (conversation_id, role, text, created, state, parts)"
                      " VALUES (?, 'assistant', 'By hand', 2.0, 'complete', ?)",
                      (chat_id, json.dumps([{"type": "tool_call", "call_id": "h", "server": "s",
                                             "name": "handmade_tool", "arguments": "{}"}])))
    other.close()
    with HistoryStore(db_path) as store:
        kept, by_hand = store.messages(chat_id)[1:]
        assert (kept.text, kept.parts) == (answer.text, ())
        assert by_hand.parts == (ToolCallPart("h", "s", "handmade_tool", "{}"),)
        assert [c.id for c in store.search_conversations("handmade")] == [chat_id]
    assert _search_index_is_consistent(db_path)


def _write_format_4_file(path: Path) -> None:
    """A history as format 4 (Kestrel before tools) writes it: its migrations, and rows
    inserted by the statements its HistoryStore and drafts used."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for migration in MIGRATIONS[:4]:
            migration(conn)
        conn.execute("PRAGMA user_version = 4")
        conn.execute("INSERT INTO conversations (title, created, updated, system_prompt, settings, model)"
                     " VALUES ('Paris trip', 1.0, 3.0, 'Be brief.', '{\"temperature\": 0.5}', 'qwen')")
        rows = [("user", "What should I SEE?", "", None, "complete"),
                ("assistant", "The Louvre.", "They like art.", AnswerStats(tokens=3).to_json(), "complete"),
                ("assistant", "Half", "", None, "interrupted")]
        for role, text, thinking, stats, state in rows:
            conn.execute("INSERT INTO messages (conversation_id, role, text, created, state, stats, folded, thinking)"
                         " VALUES (1, ?, ?, 2.0, ?, ?, ?, ?)", (role, text, state, stats, text.casefold(), thinking))
        conn.execute("INSERT INTO drafts (chat, text, updated) VALUES (1, 'and then?', 3.0)")
    finally:
        conn.close()


def test_a_format_4_history_keeps_everything_and_its_answers_can_use_tools(db_path: Path) -> None:
    _write_format_4_file(db_path)
    with HistoryStore(db_path) as store:
        [chat] = store.list_conversations()
        assert (chat.title, chat.system_prompt, chat.model, chat.settings.temperature) == (
            "Paris trip", "Be brief.", "qwen", 0.5)
        question, answer, half = store.messages(chat.id)
        assert [(m.role, m.text, m.thinking, m.state, m.parts) for m in (question, answer, half)] == [
            (Role.USER, "What should I SEE?", "", MessageState.COMPLETE, ()),
            (Role.ASSISTANT, "The Louvre.", "They like art.", MessageState.COMPLETE, ()),
            (Role.ASSISTANT, "Half", "", MessageState.INTERRUPTED, ())]
        assert answer.stats == AnswerStats(tokens=3)
        assert read_drafts(store) == {chat.id: "and then?"}
        assert [c.id for c in store.search_conversations("should i see")] == [chat.id]
        store.update_message(half.id, text=joined_text(PARTS), parts=PARTS, state=MessageState.COMPLETE)
        assert store.get_message(half.id).parts == PARTS
        assert [c.id for c in store.search_conversations("get_current_time")] == [chat.id]
        write_drafts(store, {chat.id: ""})
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 10
    finally:
        conn.close()
    assert _search_index_is_consistent(db_path)


def test_a_copied_chat_keeps_its_parts(db_path: Path, tmp_path: Path) -> None:
    with HistoryStore(Path(":memory:")) as memory, HistoryStore(db_path) as store:
        chat_id, answer = _answered(memory)
        carried = history_repair.copy_conversations(memory, store)
        assert store.messages(carried[chat_id])[-1].parts == answer.parts


def test_recovering_a_damaged_history_keeps_parts_and_thinking(db_path: Path) -> None:
    write_history(db_path)
    with HistoryStore(db_path) as store:
        answer = store.messages(1)[1]
        store.update_message(answer.id, parts=(TextPart(answer.text), CALL, RESULT), thinking="Hmm.")
    damage_page(db_path, 2)  # every conversation row: the messages are what is left
    done = history_repair.replace_damaged(db_path, recover=True)
    assert done.messages > 0
    with HistoryStore(db_path) as store:
        again = store.get_message(answer.id)
        assert (again.text, again.parts, again.thinking) == (answer.text, (TextPart(answer.text), CALL, RESULT),
                                                             "Hmm.")
        assert [c.id for c in store.search_conversations("europe/paris")] == [1]


def test_a_turn_splits_into_the_rounds_the_model_is_given_back() -> None:
    second = ToolCallPart("call_2", "files", "read_file", '{"path":"a.txt"}')
    parts = (TextPart("Looking."), CALL, TextPart(" Also: "), second, RESULT,
             ToolResultPart("call_2", "denied", denied=True), TextPart("Done."))
    assert tool_rounds(parts) == [
        ToolRound("Looking.\n\nAlso:", (CALL, second), (RESULT, ToolResultPart("call_2", "denied", denied=True))),
        ToolRound("Done.", (), ())]
    assert tool_rounds((CALL,)) == [ToolRound("", (CALL,), ())]  # stopped while the call ran
    assert tool_rounds(()) == []
    assert joined_text(parts) == "Looking.\n\nAlso:\n\nDone."


def test_search_reads_the_start_of_a_long_result(store: HistoryStore) -> None:
    chat = store.create_conversation()
    long = "a" * (SEARCHED_RESULT_CHARS - 20) + " early word " + "b" * 50_000 + " late word"
    store.add_message(chat.id, Role.ASSISTANT, "", parts=(CALL, ToolResultPart("call_1", long)))
    assert [c.id for c in store.search_conversations("early word")] == [chat.id]
    assert store.search_conversations("late word") == []
    assert store.messages(chat.id)[0].parts[1].text == long  # kept whole all the same


def test_recovering_a_history_from_before_thinking_and_parts_keeps_its_messages(db_path: Path) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    MIGRATIONS[0](conn)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO conversations (id, title, created, updated, settings) VALUES (1, 'Old', 1, 1, '{}')")
    conn.execute("INSERT INTO messages (conversation_id, role, text, created, state)"
                 " VALUES (1, 'assistant', 'Kept', 1, 'complete')")
    conn.close()
    done = history_repair.replace_damaged(db_path, recover=True)
    assert (done.conversations, done.messages) == (1, 1)
    with HistoryStore(db_path) as store:
        assert [(m.text, m.thinking, m.parts) for m in store.messages(1)] == [("Kept", "", ())]
