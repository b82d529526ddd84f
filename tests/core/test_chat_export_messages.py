"""Chat exports and imports that other tools wrote or tampered with: a byte-order mark, system
messages, numbers JSON cannot hold, sizes at the limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.answer_stats import AnswerStats
from app.core.chat_export import MAX_BYTES, ChatFileError, read_chat, to_json, to_markdown
from app.core.conversation import Role
from app.core.store.history import HistoryStore

CHAT = {"format": "kestrel-chat", "version": 1, "title": "Tea", "system_prompt": "",
        "messages": [{"role": "user", "text": "Green or black?"}, {"role": "assistant", "text": "Green."}]}


def _strict(text: str) -> object:
    """JSON as the standard has it: no NaN, no Infinity (Python's json allows them)."""
    def refuse(word: str) -> object:
        raise ValueError(f"{word} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_json_export_with_a_byte_order_mark_imports(tmp_path: Path) -> None:
    path = tmp_path / "from notepad.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(CHAT).encode("utf-8"))
    chat = read_chat(path)
    assert chat.conversation.title == "Tea" and [m.text for m in chat.messages] == ["Green or black?", "Green."]


def test_imported_system_messages_become_the_system_prompt_not_kestrel_speaking(tmp_path: Path) -> None:
    data = dict(CHAT, system_prompt="Be brief.", messages=[
        {"role": "system", "text": "You are a tea expert."}, *CHAT["messages"],
        {"role": "system", "text": "  "}, {"role": "system", "text": "Answer in French."}])
    path = tmp_path / "with system.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    chat = read_chat(path)
    assert chat.conversation.system_prompt == "Be brief.\n\nYou are a tea expert.\n\nAnswer in French."
    assert [m.role for m in chat.messages] == [Role.USER, Role.ASSISTANT]


def test_a_system_message_already_in_the_history_is_exported_as_a_system_prompt(store: HistoryStore) -> None:
    chat = store.create_conversation("Old import")
    store.add_message(chat.id, Role.SYSTEM, "You are a tea expert.")
    store.add_message(chat.id, Role.USER, "Green or black?")
    markdown = to_markdown(store.get_conversation(chat.id), store.messages(chat.id))
    assert "## System prompt\n\nYou are a tea expert." in markdown


def test_numbers_json_cannot_hold_are_not_imported_nor_exported(tmp_path: Path, store: HistoryStore) -> None:
    path = tmp_path / "huge stats.json"
    stats = {"tokens": 3, "tokens_per_s": 1e400, "ttft_ms": -1e400, "total_ms": 5.0}
    path.write_text(json.dumps(dict(CHAT, messages=[{"role": "assistant", "text": "x", "stats": stats}]))
                    .replace("Infinity", "1e400"), encoding="utf-8")
    imported = read_chat(path).messages[0].stats
    assert imported == AnswerStats(tokens=3, total_ms=5.0)
    # A history written before this check may hold them already: the export is JSON still.
    chat = store.create_conversation("Stored infinity")
    store.add_message(chat.id, Role.ASSISTANT, "x", stats=AnswerStats(tokens=3, tokens_per_s=float("inf"),
                                                                      ttft_ms=float("nan")))
    exported = _strict(to_json(store.get_conversation(chat.id), store.messages(chat.id)))
    assert isinstance(exported, dict)
    written = exported["messages"][0]["stats"]
    assert written["tokens"] == 3 and written["tokens_per_s"] is None and written["ttft_ms"] is None


def test_a_file_just_over_the_limit_says_two_different_sizes(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    with path.open("wb") as file:
        file.truncate(MAX_BYTES + 1)
    with pytest.raises(ChatFileError) as refused:
        read_chat(path)
    said = str(refused.value)
    assert f"{MAX_BYTES + 1:,} bytes" in said and "256 MiB" in said and "MB" not in said.replace("MiB", ""), said
