"""An answer's stats in the real history: stored as every Kestrel stored them, read back as
AnswerStats, whatever an older (or newer) Kestrel or a damaged file left in the column."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from app.core.store import history_repair
from app.core.answer_stats import AnswerStats, FinishReason
from app.core.conversation import MessageState, Role
from app.core.store.history import HistoryStore
from app.core.store.history_schema import MIGRATIONS
from tests.core.damaged_history import damage_page, write_history

FULL = AnswerStats(ttft_ms=41.5, tokens=16, tokens_per_s=52.25, prompt_tokens=20, prompt_tokens_evaluated=7,
                   device="GPU 0 (CUDA)", finish_reason=FinishReason.CONTEXT, chat_format="chatml", total_ms=350.75,
                   messages_left_out=2, template_note="the template has an error", thinking_ms=120.5, threads=6)
# The keys AnswerStats.to_dict has written since threads came (1bd4049); older rows hold a prefix.
KEYS = ["ttft_ms", "tokens", "tokens_per_s", "prompt_tokens", "prompt_tokens_evaluated", "device",
        "finish_reason", "chat_format", "total_ms", "messages_left_out", "template_note", "thinking_ms", "threads"]
FIRST_TEN = {"ttft_ms": 41.5, "tokens": 16, "tokens_per_s": 52.25, "prompt_tokens": 20,
             "prompt_tokens_evaluated": 20, "device": "CPU", "finish_reason": "length", "chat_format": "embedded",
             "total_ms": 350.75, "messages_left_out": 0}

OLDEST = AnswerStats(ttft_ms=41.5, tokens=16, tokens_per_s=52.25, prompt_tokens=20, prompt_tokens_evaluated=20,
                     device="CPU", finish_reason=FinishReason.LENGTH, chat_format="embedded", total_ms=350.75)

# What Kestrel versions wrote in messages.stats, and how this one reads it.
OLD_ROWS = [
    # The engine's dict before AnswerStats (45e573c) and AnswerStats' first fields (3a7d4de).
    (json.dumps(FIRST_TEN), OLDEST),
    # template_note (101512d), thinking_ms (8433d63), threads (1bd4049): the current form.
    (json.dumps({**FIRST_TEN, "template_note": "note", "thinking_ms": 9.5}),
     dataclasses.replace(OLDEST, template_note="note", thinking_ms=9.5)),
    (json.dumps({**FIRST_TEN, "finish_reason": "cancelled", "template_note": "", "thinking_ms": 0.0, "threads": 4}),
     dataclasses.replace(OLDEST, finish_reason=FinishReason.CANCELLED, threads=4)),
    # An answer the engine failed: only its words, from the first version on.
    ('{"error": "The engine stopped unexpectedly."}', AnswerStats(error="The engine stopped unexpectedly.")),
    # A newer Kestrel's keys and finish reasons, and values of the wrong type, give way to defaults.
    ('{"tokens": 3, "from_the_future": [1, {"a": 2}], "finish_reason": "tool_calls", "device": null}',
     AnswerStats(tokens=3)),
    ('{"tokens": "many", "ttft_ms": true, "device": 7, "thinking_ms": 5, "threads": 2.5}',
     AnswerStats(thinking_ms=5.0)),
    ('{"ttft_ms": 1%s, "tokens": 5}' % ("0" * 400), AnswerStats(tokens=5)),
    ("{}", AnswerStats()),
    # No stats, or a column another program filled with something that is not an object.
    (None, None),
    ("[1, 2]", None),
    ('"text"', None),
    ("{not json", None),
]


def _stored(path: Path) -> list[str | None]:
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT stats FROM messages ORDER BY id")]
    finally:
        conn.close()


def _insert_rows(path: Path, stored: list[str | None]) -> None:
    """Rows written straight into the file, as an older Kestrel left them."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.executemany("INSERT INTO messages (conversation_id, role, text, created, state, stats)"
                         " VALUES (1, 'assistant', ?, 1.0, 'complete', ?)",
                         [(f"answer {number}", value) for number, value in enumerate(stored)])
    finally:
        conn.close()


def test_stats_round_trip_through_the_history_as_answer_stats(store: HistoryStore, db_path: Path) -> None:
    chat = store.create_conversation()
    answer = store.add_message(chat.id, Role.ASSISTANT, "", state=MessageState.STREAMING)
    assert answer.stats is None
    store.update_message(answer.id, text="Done.", state=MessageState.COMPLETE, stats=FULL)
    stopped = store.add_message(chat.id, Role.ASSISTANT, "Sto", stats=AnswerStats(finish_reason=FinishReason.CANCELLED))
    [first, second] = store.messages(chat.id)
    assert first.stats == FULL and first.stats.finish_reason is FinishReason.CONTEXT
    assert second.stats == stopped.stats and second.stats.finish_reason is FinishReason.CANCELLED
    with HistoryStore(db_path) as again:
        assert again.get_message(answer.id).stats == FULL


def test_the_stored_form_is_the_one_older_kestrels_read(store: HistoryStore, db_path: Path) -> None:
    # Unchanged JSON, hence no migration: a history stays readable by the Kestrel before this one.
    chat = store.create_conversation()
    store.add_message(chat.id, Role.ASSISTANT, "a", stats=FULL)
    store.add_message(chat.id, Role.ASSISTANT, "b", state=MessageState.INTERRUPTED,
                      stats=AnswerStats(error="The engine stopped."))
    full, failed = _stored(db_path)
    assert full is not None and list(json.loads(full)) == KEYS
    assert json.loads(full)["finish_reason"] == "context" and json.loads(full) == FULL.to_dict()
    assert failed == '{"error": "The engine stopped."}'


@pytest.mark.parametrize(("stored", "expected"), OLD_ROWS)
def test_rows_older_and_newer_kestrels_wrote_still_read(store: HistoryStore, db_path: Path, stored: str | None,
                                                        expected: AnswerStats | None) -> None:
    store.create_conversation()
    _insert_rows(db_path, [stored])
    [message] = store.messages(1)
    assert message.stats == expected
    if expected is not None:
        assert type(message.stats.finish_reason) is FinishReason


def test_a_first_format_history_with_old_stats_opens_and_reads_them(db_path: Path) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        MIGRATIONS[0](conn)
        conn.execute("PRAGMA user_version = 1")
        conn.execute("INSERT INTO conversations (id, title, created, updated, settings) VALUES (1, 'Old', 1, 1, '{}')")
    finally:
        conn.close()
    _insert_rows(db_path, [stored for stored, _ in OLD_ROWS])
    with HistoryStore(db_path) as store:
        assert [m.stats for m in store.messages(1)] == [expected for _, expected in OLD_ROWS]
        assert len(store.search_conversations("answer 3")) == 1


def test_recovery_from_a_damaged_file_keeps_each_answers_stats(db_path: Path) -> None:
    write_history(db_path)
    with HistoryStore(db_path) as store:
        store.update_message(2, stats=FULL)
        store.update_message(4, stats=AnswerStats(error="The engine stopped."))
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute("UPDATE messages SET stats = ? WHERE id = 6", (json.dumps(FIRST_TEN),))
        conn.execute("UPDATE messages SET stats = '{not json' WHERE id = 8")
    finally:
        conn.close()
    damage_page(db_path, 5)  # the messages-by-conversation index: every row can still be read
    done = history_repair.replace_damaged(db_path, recover=True)
    assert done.messages > 8
    with HistoryStore(db_path) as store:
        stats = {m.id: m.stats for m in store.messages(1)}
    assert stats[2] == FULL and stats[4] == AnswerStats(error="The engine stopped.")
    assert stats[6] == AnswerStats.from_dict(FIRST_TEN) and stats[6].finish_reason is FinishReason.LENGTH
    assert stats[8] is None and stats[1] is None


def test_an_engine_failure_reports_nothing_else() -> None:
    failed = AnswerStats(error="The engine stopped.")
    assert not failed.reported and FULL.reported
    assert failed.to_dict() == {"error": "The engine stopped."}
    assert AnswerStats.from_json(failed.to_json()) == failed


def test_finish_reasons_are_the_words_older_kestrels_wrote() -> None:
    assert [reason.value for reason in FinishReason] == ["stop", "length", "context", "cancelled"]
    assert json.dumps({"reason": FinishReason.CONTEXT}) == '{"reason": "context"}'
    assert AnswerStats().finish_reason is FinishReason.STOP


def test_a_reason_given_as_its_word_becomes_the_enum_and_an_unknown_word_is_a_bug() -> None:
    assert AnswerStats(finish_reason="length").finish_reason is FinishReason.LENGTH
    assert AnswerStats(finish_reason="length").to_dict()["finish_reason"] == "length"
    with pytest.raises(ValueError):
        AnswerStats(finish_reason="tool_calls")
