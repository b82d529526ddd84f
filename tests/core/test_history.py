"""Tests for HistoryStore on a real SQLite file: CRUD, order, search, transactions."""

from __future__ import annotations

import random
import sqlite3
import threading
from pathlib import Path

import pytest

from app.core.answer_stats import AnswerStats
from app.core.conversation import MessageState, Role
from app.core.store import history
from app.core.generation import GenerationSettings
from app.core.store.history import HistoryStore
from tests.core.conftest import FakeClock


def test_create_and_get_conversation(store: HistoryStore, clock: FakeClock) -> None:
    settings = GenerationSettings(temperature=0.2, max_tokens=100)
    created = store.create_conversation("Trip plans", "Be brief.", settings, "gemma-3-270m")
    assert created.title == "Trip plans"
    assert created.system_prompt == "Be brief."
    assert created.settings == settings
    assert created.model == "gemma-3-270m"
    assert created.created == created.updated == clock.now
    assert store.get_conversation(created.id) == created


def test_create_conversation_defaults(store: HistoryStore) -> None:
    created = store.create_conversation()
    assert (created.title, created.system_prompt, created.model) == ("New chat", "", None)
    assert created.settings == GenerationSettings()


def test_create_conversation_refuses_invalid_settings(store: HistoryStore) -> None:
    with pytest.raises(ValueError, match="temperature"):
        store.create_conversation(settings=GenerationSettings(temperature=9.0))
    assert store.list_conversations() == []


def test_missing_ids_raise_key_error(store: HistoryStore) -> None:
    with pytest.raises(KeyError):
        store.get_conversation(42)
    with pytest.raises(KeyError):
        store.rename_conversation(42, "x")
    with pytest.raises(KeyError):
        store.delete_conversation(42)
    with pytest.raises(KeyError):
        store.add_message(42, Role.USER, "hello")
    with pytest.raises(KeyError):
        store.update_message(42, text="x")
    with pytest.raises(KeyError):
        store.get_message(42)


def test_list_is_newest_updated_first(store: HistoryStore, clock: FakeClock) -> None:
    first = store.create_conversation("first")
    clock.advance(1)
    second = store.create_conversation("second")
    clock.advance(1)
    third = store.create_conversation("third")
    assert [c.title for c in store.list_conversations()] == ["third", "second", "first"]
    clock.advance(1)
    store.add_message(first.id, Role.USER, "bump")
    assert [c.id for c in store.list_conversations()] == [first.id, third.id, second.id]


def test_rename_and_update_change_only_given_fields(
    store: HistoryStore, clock: FakeClock
) -> None:
    original = store.create_conversation("old", "prompt", GenerationSettings(), "model-a")
    clock.advance(5)
    store.rename_conversation(original.id, "new")
    renamed = store.get_conversation(original.id)
    assert (renamed.title, renamed.system_prompt, renamed.model) == ("new", "prompt", "model-a")
    # A new title is not activity: the chat keeps its place in the newest-first list.
    assert renamed.updated == original.updated
    assert renamed.created == original.created

    clock.advance(5)
    colder = GenerationSettings(temperature=0.1)
    store.update_conversation(original.id, settings=colder)
    updated = store.get_conversation(original.id)
    assert updated.settings == colder
    assert (updated.title, updated.system_prompt, updated.model) == ("new", "prompt", "model-a")
    assert updated.updated == original.updated + 10

    store.update_conversation(original.id, system_prompt="Answer in French.", model="model-b")
    final = store.get_conversation(original.id)
    assert (final.system_prompt, final.model, final.settings) == (
        "Answer in French.",
        "model-b",
        colder,
    )


def test_messages_round_trip_in_order(store: HistoryStore, clock: FakeClock) -> None:
    conversation = store.create_conversation()
    clock.advance(2)
    question = store.add_message(conversation.id, Role.USER, "What is 2+2?")
    answer = store.add_message(
        conversation.id, Role.ASSISTANT, "4", stats=AnswerStats(tokens=1, device="cpu")
    )
    assert question.role is Role.USER
    assert question.state is MessageState.COMPLETE
    assert question.created == clock.now
    assert answer.stats == AnswerStats(tokens=1, device="cpu")
    assert store.messages(conversation.id) == [question, answer]
    assert store.get_conversation(conversation.id).updated == clock.now


def test_update_message_changes_only_given_fields(store: HistoryStore) -> None:
    conversation = store.create_conversation()
    message = store.add_message(
        conversation.id, Role.ASSISTANT, "partial", state=MessageState.STREAMING
    )
    store.update_message(message.id, text="partial answer")
    assert store.get_message(message.id).state is MessageState.STREAMING
    store.update_message(message.id, state=MessageState.COMPLETE, stats=AnswerStats(tokens=2))
    final = store.get_message(message.id)
    assert (final.text, final.state, final.stats) == (
        "partial answer",
        MessageState.COMPLETE,
        AnswerStats(tokens=2),
    )


def test_delete_conversation_cascades_to_its_messages(store: HistoryStore) -> None:
    doomed = store.create_conversation("doomed")
    kept = store.create_conversation("kept")
    store.add_message(doomed.id, Role.USER, "bye")
    kept_message = store.add_message(kept.id, Role.USER, "stay")
    store.delete_conversation(doomed.id)
    assert [c.id for c in store.list_conversations()] == [kept.id]
    assert store.messages(doomed.id) == []
    assert store.messages(kept.id) == [kept_message]
    with store.transaction() as conn:
        count = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    assert count == 1


def test_delete_messages_from_drops_that_message_and_later_ones(store: HistoryStore) -> None:
    conversation = store.create_conversation()
    other = store.create_conversation()
    texts = ["q1", "a1", "q2", "a2"]
    sent = [store.add_message(conversation.id, Role.USER, text) for text in texts]
    elsewhere = store.add_message(other.id, Role.USER, "other chat, later id")
    assert store.delete_messages_from(conversation.id, sent[2].id) == 2
    assert [m.text for m in store.messages(conversation.id)] == ["q1", "a1"]
    assert store.messages(other.id) == [elsewhere]
    with pytest.raises(KeyError):
        store.delete_messages_from(conversation.id, elsewhere.id)
    # A regenerated answer gets a fresh id: the UI never sees one id twice.
    again = store.add_message(conversation.id, Role.USER, "q2 edited")
    assert again.id > elsewhere.id


def test_search_matches_titles_and_message_text(store: HistoryStore, clock: FakeClock) -> None:
    by_title = store.create_conversation("Recipe for BREAD")
    clock.advance(1)
    by_message = store.create_conversation("Kitchen")
    store.add_message(by_message.id, Role.ASSISTANT, "Knead the bread dough ten minutes.")
    clock.advance(1)
    store.create_conversation("Taxes")
    assert [c.id for c in store.search_conversations("bread")] == [by_message.id, by_title.id]
    assert [c.id for c in store.search_conversations("KNEAD")] == [by_message.id]
    assert store.search_conversations("sourdough") == []


def test_search_ignores_case_beyond_ascii(store: HistoryStore) -> None:
    greek = store.create_conversation("ΣΟΦΙΑ")
    german = store.create_conversation("Notes")
    store.add_message(german.id, Role.USER, "Die STRASSE ist lang")
    assert [c.id for c in store.search_conversations("σοφια")] == [greek.id]
    assert [c.id for c in store.search_conversations("straße")] == [german.id]


def test_search_treats_wildcards_as_plain_text(store: HistoryStore) -> None:
    percent = store.create_conversation("Growth of 100% this year")
    underscore = store.create_conversation("my_file.txt")
    store.create_conversation("plain words")
    store.create_conversation("myXfile.txt")
    assert [c.id for c in store.search_conversations("100%")] == [percent.id]
    assert store.search_conversations("%") == [percent]
    assert [c.id for c in store.search_conversations("my_file")] == [underscore.id]
    assert [c.id for c in store.search_conversations("_")] == [underscore.id]


def test_transaction_rolls_back_on_error(store: HistoryStore) -> None:
    conversation = store.create_conversation()
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction():
            store.add_message(conversation.id, Role.USER, "inside")
            store.rename_conversation(conversation.id, "renamed")
            raise RuntimeError("boom")
    assert store.messages(conversation.id) == []
    assert store.get_conversation(conversation.id).title == "New chat"
    # The store stays usable after a rollback.
    assert store.add_message(conversation.id, Role.USER, "after").text == "after"


def test_transaction_commits_as_one(db_path: Path, store: HistoryStore) -> None:
    conversation = store.create_conversation()
    with store.transaction():
        store.add_message(conversation.id, Role.USER, "one")
        store.add_message(conversation.id, Role.ASSISTANT, "two")
    other = sqlite3.connect(db_path)
    try:
        texts = [row[0] for row in other.execute("SELECT text FROM messages ORDER BY id")]
    finally:
        other.close()
    assert texts == ["one", "two"]


def test_everything_survives_reopening(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        conversation = store.create_conversation("kept", "prompt")
        message = store.add_message(conversation.id, Role.USER, "still here", stats=AnswerStats(ttft_ms=1.5))
        conversation = store.get_conversation(conversation.id)
    with HistoryStore(db_path) as store:
        assert store.list_conversations() == [conversation]
        assert store.messages(conversation.id) == [message]


def test_store_turns_on_wal_and_foreign_keys(store: HistoryStore) -> None:
    with store.transaction() as conn:
        foreign_keys = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    assert foreign_keys == 1
    other = sqlite3.connect(store.path)
    try:
        # journal_mode is stored in the file, so a fresh connection sees WAL too.
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        indexes = {row[1] for row in other.execute("PRAGMA index_list(messages)")}
    finally:
        other.close()
    assert "messages_by_conversation" in indexes


def _indexed(store: HistoryStore, text: str) -> list[int]:
    """Ids of the messages the search index finds for `text` (3 characters or more)."""
    with store.transaction() as conn:
        rows = conn.execute(
            "SELECT rowid FROM message_search WHERE message_search MATCH ? ORDER BY rowid",
            ('"' + text + '"',),
        ).fetchall()
    return [row[0] for row in rows]


def _assert_index_matches_messages(store: HistoryStore) -> None:
    with store.transaction() as conn:
        # rank 1: compare the index with messages.folded too, not only with itself.
        conn.execute(
            "INSERT INTO message_search(message_search, rank) VALUES ('integrity-check', 1)"
        )


def test_search_index_follows_update_message(store: HistoryStore) -> None:
    conversation = store.create_conversation("Chat")
    message = store.add_message(
        conversation.id, Role.ASSISTANT, "Draft ANSWER", state=MessageState.STREAMING
    )
    assert _indexed(store, "draft") == [message.id]
    store.update_message(message.id, text="Final answer")
    assert _indexed(store, "draft") == []
    assert _indexed(store, "final") == [message.id]
    # A change of state alone keeps what is indexed.
    store.update_message(message.id, state=MessageState.COMPLETE)
    assert _indexed(store, "final") == [message.id]
    assert store.search_conversations("draft") == []
    assert [c.id for c in store.search_conversations("FINAL")] == [conversation.id]
    _assert_index_matches_messages(store)


def test_search_index_follows_delete_messages_from(store: HistoryStore) -> None:
    conversation = store.create_conversation("Chat")
    kept = store.add_message(conversation.id, Role.USER, "first question")
    cut = store.add_message(conversation.id, Role.ASSISTANT, "answer to regenerate")
    later = store.add_message(conversation.id, Role.USER, "second question")
    assert _indexed(store, "question") == [kept.id, later.id]
    store.delete_messages_from(conversation.id, cut.id)
    assert _indexed(store, "question") == [kept.id]
    assert _indexed(store, "regenerate") == []
    assert store.search_conversations("regenerate") == []
    assert store.search_conversations("second") == []
    _assert_index_matches_messages(store)


def test_search_index_follows_delete_conversation(store: HistoryStore) -> None:
    doomed = store.create_conversation("Doomed")
    kept = store.create_conversation("Kept")
    store.add_message(doomed.id, Role.USER, "shared words here")
    store.add_message(doomed.id, Role.USER, "only in the doomed chat")
    kept_message = store.add_message(kept.id, Role.USER, "shared words too")
    store.delete_conversation(doomed.id)
    # The foreign key's cascade deletes the messages; the trigger still runs for each.
    assert _indexed(store, "shared") == [kept_message.id]
    assert _indexed(store, "only in") == []
    assert [c.id for c in store.search_conversations("shared")] == [kept.id]
    _assert_index_matches_messages(store)


@pytest.mark.parametrize(
    "query",
    [
        '"', '""', 'say "hi"', "*", "wild*", "NEAR", "NEAR(cats dogs)", "cats OR dogs",
        "cats AND dogs", "NOT dogs", "(cats)", "-dogs", "^cats", "folded: cats",
        "{folded}: cats", "cats + dogs", "'single'",
    ],
)
def test_search_treats_query_syntax_as_plain_text(store: HistoryStore, query: str) -> None:
    literal = store.create_conversation("Literal")
    store.add_message(literal.id, Role.USER, f"before {query} after")
    words = store.create_conversation("Words")
    # What an FTS5 query would match if the user's text were read as syntax.
    store.add_message(words.id, Role.USER, "dogs and cats, folded cats, hi single")
    assert [c.id for c in store.search_conversations(query)] == [literal.id]


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("Die STRASSE ist lang", "straße"),
        ("Die Straße ist lang", "STRASSE"),
        ("GROẞE Straße", "große"),
        ("Η ΟΔΟΣ", "οδος"),
        ("ο δρόμος", "ΔΡΌΜΟΣ"),
        ("İSTANBUL", "İstanbul"),
        ("DİYARBAKIR", "di\u0307yarbakir"),
        ("the ﬁnal word", "FINAL"),
    ],
)
def test_search_folds_case_like_python(store: HistoryStore, text: str, query: str) -> None:
    assert query.casefold() in text.casefold()
    found = store.create_conversation("Found")
    store.add_message(found.id, Role.USER, text)
    store.create_conversation("Other")
    assert [c.id for c in store.search_conversations(query)] == [found.id]


def test_search_does_not_fold_beyond_python(store: HistoryStore) -> None:
    # Python's casefold is the rule: no Turkish-only dotless i, no accents stripped.
    conversation = store.create_conversation("Chat")
    store.add_message(conversation.id, Role.USER, "ıstakoz and café")
    assert store.search_conversations("istakoz") == []
    assert store.search_conversations("cafe") == []
    assert [c.id for c in store.search_conversations("CAFÉ")] == [conversation.id]


def test_search_finds_queries_shorter_than_a_trigram(store: HistoryStore) -> None:
    short = store.create_conversation("Chat")
    store.add_message(short.id, Role.USER, "Fuß, ok?")
    other = store.create_conversation("Other")
    store.add_message(other.id, Role.USER, "the ﬁnal word")
    assert [c.id for c in store.search_conversations("OK")] == [short.id]
    assert [c.id for c in store.search_conversations("?")] == [short.id]
    assert [c.id for c in store.search_conversations("ẞ")] == [short.id]
    assert [c.id for c in store.search_conversations("fi")] == [other.id]
    # Two characters typed, three after folding: the index answers it.
    assert [c.id for c in store.search_conversations("ﬁn")] == [other.id]
    assert [c.id for c in store.search_conversations("uß,")] == [short.id]
    assert [c.id for c in store.search_conversations("zq")] == []


def test_search_finds_text_after_a_nul(store: HistoryStore) -> None:
    conversation = store.create_conversation("Chat")
    store.add_message(conversation.id, Role.USER, "before\0AFTER the nul")
    assert [c.id for c in store.search_conversations("after the")] == [conversation.id]
    assert [c.id for c in store.search_conversations("e\0a")] == [conversation.id]


@pytest.mark.parametrize("index_hits_max", [history._INDEX_HITS_MAX, 0])
def test_search_agrees_with_python_casefold_on_random_text(
    store: HistoryStore, monkeypatch: pytest.MonkeyPatch, index_hits_max: int
) -> None:
    # 0: every query found in any message takes the scan instead of the index.
    monkeypatch.setattr(history, "_INDEX_HITS_MAX", index_hits_max)
    rng = random.Random(7)
    alphabet = "aSsßẞſςΣσİiIıﬁf \"*%_"
    with store.transaction():
        for _ in range(12):
            conversation = store.create_conversation(
                "".join(rng.choices(alphabet, k=rng.randint(0, 6)))
            )
            for _ in range(rng.randint(0, 4)):
                text = "".join(rng.choices(alphabet, k=rng.randint(0, 30)))
                store.add_message(conversation.id, Role.USER, text)
    conversations = store.list_conversations()
    texts = {c.id: [c.title] + [m.text for m in store.messages(c.id)] for c in conversations}
    for _ in range(300):
        query = "".join(rng.choices(alphabet, k=rng.randint(1, 5)))
        expected = [
            c.id for c in conversations
            if any(query.casefold() in text.casefold() for text in texts[c.id])
        ]
        assert [c.id for c in store.search_conversations(query)] == expected, query


def test_store_can_be_closed_on_another_thread_when_asked(db_path: Path) -> None:
    def close_elsewhere(store: HistoryStore) -> list[BaseException]:
        errors: list[BaseException] = []

        def close() -> None:
            try:
                store.close()
            except sqlite3.Error as error:
                errors.append(error)

        thread = threading.Thread(target=close)
        thread.start()
        thread.join()
        return errors

    guarded = HistoryStore(db_path)
    try:
        errors = close_elsewhere(guarded)
        assert [type(error) for error in errors] == [sqlite3.ProgrammingError]
    finally:
        guarded.close()
    shared = HistoryStore(db_path, check_same_thread=False)
    assert close_elsewhere(shared) == []
