"""Chat export and import: Markdown to read, JSON to import back, and hostile files refused
with a message that names the file and what is wrong."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from app.core import chat_export
from app.core.answer_stats import AnswerStats, FinishReason
from app.core.chat_export import MAX_BYTES, ChatFileError, read_chat, to_json, to_markdown
from app.core.conversation import MessageState, Role
from app.core.generation import GenerationSettings
from app.core.store.history import HistoryStore


def _chat(store: HistoryStore):
    chat = store.create_conversation("Trip to Lisbon", system_prompt="Be brief.",
                                     settings=GenerationSettings(temperature=0.2, max_tokens=64), model="tiny")
    store.add_message(chat.id, Role.USER, "Where should I eat? **bold** `code`")
    answer = store.add_message(chat.id, Role.ASSISTANT, "", state=MessageState.STREAMING)
    store.update_message(answer.id, text="Try the *pastéis*.", thinking="They asked for food.",
                         state=MessageState.COMPLETE, stats=AnswerStats(tokens=7, device="CPU", tokens_per_s=12.5))
    store.add_message(chat.id, Role.USER, "And cut off?")
    store.add_message(chat.id, Role.ASSISTANT, "Half an ans", state=MessageState.INTERRUPTED)
    store.add_message(chat.id, Role.USER, "Again?")
    store.add_message(chat.id, Role.ASSISTANT, "Fail", state=MessageState.INTERRUPTED,
                      stats=AnswerStats(error="The engine stopped."))
    return store.get_conversation(chat.id), store.messages(chat.id)


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_json_export_imports_back_with_the_same_messages(store: HistoryStore, tmp_path: Path) -> None:
    conversation, messages = _chat(store)
    path = tmp_path / "chat.json"
    path.write_text(to_json(conversation, messages), encoding="utf-8")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert (data["format"], data["version"], data["title"], data["model"]) == ("kestrel-chat", 1, "Trip to Lisbon",
                                                                               "tiny")
    imported = read_chat(path)
    again = imported.conversation
    assert (again.title, again.system_prompt, again.settings, again.model, again.created) == (
        conversation.title, conversation.system_prompt, conversation.settings, conversation.model, conversation.created)
    strip = [(m.role, m.text, m.thinking, m.stats, m.state, m.created) for m in messages]
    assert [(m.role, m.text, m.thinking, m.stats, m.state, m.created) for m in imported.messages] == strip


def test_json_export_writes_stats_as_older_kestrels_did(store: HistoryStore) -> None:
    conversation, messages = _chat(store)
    exported = [m["stats"] for m in json.loads(to_json(conversation, messages))["messages"]]
    assert exported == [None, {"ttft_ms": 0.0, "tokens": 7, "tokens_per_s": 12.5, "prompt_tokens": 0,
                               "prompt_tokens_evaluated": 0, "device": "CPU", "finish_reason": "stop",
                               "chat_format": "", "total_ms": 0.0, "messages_left_out": 0, "template_note": "",
                               "thinking_ms": 0.0, "threads": 0},
                        None, None, None, {"error": "The engine stopped."}]
    assert list(exported[1]) == ["ttft_ms", "tokens", "tokens_per_s", "prompt_tokens", "prompt_tokens_evaluated",
                                 "device", "finish_reason", "chat_format", "total_ms", "messages_left_out",
                                 "template_note", "thinking_ms", "threads"]


# A chat exported by the Kestrel before typed stats (export version 1), as it wrote it.
_OLDER_EXPORT = """{
 "format": "kestrel-chat", "version": 1, "title": "Old", "system_prompt": "", "settings": {"temperature": 0.5},
 "model": null, "created": 1764500000.0, "updated": 1764500100.0,
 "messages": [
  {"role": "user", "text": "Hi", "thinking": "", "stats": null, "created": 1764500000.0, "state": "complete"},
  {"role": "assistant", "text": "Hello", "thinking": "", "stats": {"ttft_ms": 41.5, "tokens": 16,
   "tokens_per_s": 52.25, "prompt_tokens": 20, "prompt_tokens_evaluated": 20, "device": "CPU",
   "finish_reason": "length", "chat_format": "embedded", "total_ms": 350.75, "messages_left_out": 1,
   "template_note": "", "thinking_ms": 0.0, "threads": 4}, "created": 1764500001.0, "state": "complete"},
  {"role": "assistant", "text": "Hel", "stats": {"error": "The engine stopped."}, "state": "interrupted"},
  {"role": "assistant", "text": "Hm", "stats": {"tokens": 2, "finish_reason": "cancelled", "later": "key"}},
  {"role": "assistant", "text": "Odd", "stats": {"tokens": "two", "finish_reason": "tool_calls", "ttft_ms": true}}
 ]
}"""


def test_an_export_from_an_older_kestrel_imports_its_stats(tmp_path: Path) -> None:
    path = tmp_path / "older.json"
    path.write_text(_OLDER_EXPORT, encoding="utf-8")
    stats = [m.stats for m in read_chat(path).messages]
    assert stats == [None, AnswerStats(ttft_ms=41.5, tokens=16, tokens_per_s=52.25, prompt_tokens=20,
                                       prompt_tokens_evaluated=20, device="CPU", finish_reason=FinishReason.LENGTH,
                                       chat_format="embedded", total_ms=350.75, messages_left_out=1, threads=4),
                     AnswerStats(error="The engine stopped."),
                     AnswerStats(tokens=2, finish_reason=FinishReason.CANCELLED), AnswerStats()]
    assert stats[1] is not None and stats[1].finish_reason is FinishReason.LENGTH


def test_markdown_export_reads_as_the_chat(store: HistoryStore) -> None:
    conversation, messages = _chat(store)
    text = to_markdown(conversation, messages)
    assert text.startswith("# Trip to Lisbon\n")
    assert "> **System prompt:** Be brief." in text
    assert "## You\n\nWhere should I eat? **bold** `code`" in text
    assert "<details><summary>Thinking</summary>\n\nThey asked for food." in text
    assert "## Assistant (interrupted)\n\nHalf an ans" in text


@pytest.mark.parametrize(("data", "said"), [
    ([1, 2], "not a Kestrel chat export"),
    ({"format": "other"}, "not a Kestrel chat export"),
    ({"format": "kestrel-chat", "version": 5, "messages": []}, "export version 5; this Kestrel reads versions 1 to 4"),
    ({"format": "kestrel-chat", "version": "1", "messages": []}, "export version '1'"),
    ({"format": "kestrel-chat", "version": 1, "messages": {}}, "messages must be a list"),
    ({"format": "kestrel-chat", "version": 1, "title": 5, "messages": []}, "title must be a text"),
    ({"format": "kestrel-chat", "version": 1, "settings": {"temperature": "hot"}, "messages": []},
     "temperature must be a number"),
    ({"format": "kestrel-chat", "version": 1, "messages": [{"role": "root", "text": "x"}]},
     "message 1 has role 'root'"),
    ({"format": "kestrel-chat", "version": 1, "messages": [{"role": ["user"], "text": "x"}]}, "message 1 has role"),
    ({"format": "kestrel-chat", "version": 1, "messages": [{"role": "tool", "text": "x"}]},
     "message 1 has role 'tool'; it must be user, assistant or system"),
    ({"format": "kestrel-chat", "version": 1, "messages": [{"role": "user", "text": None}]},
     "message 1's text must be a text"),
    ({"format": "kestrel-chat", "version": 1, "messages": [{"role": "user", "text": "a", "created": "now"}]},
     "message 1's created must be a time"),
    ({"format": "kestrel-chat", "version": 1, "messages": [{"role": "user", "text": "a", "state": "streaming"}]},
     "message 1 has state 'streaming'"),
    ({"format": "kestrel-chat", "version": 1, "messages": [{"role": "user", "text": "a", "stats": {"x": [1]}}]},
     "message 1 has stats"),
    ({"format": "kestrel-chat", "version": 1, "messages": ["hello"]}, "message 1 is not an object"),
    # A date no clock can show: once imported it broke the Markdown export (time.localtime overflowed).
    ({"format": "kestrel-chat", "version": 1, "created": 1e20, "messages": []}, "created must be a time"),
])
def test_hostile_or_wrong_files_are_refused_naming_the_file(tmp_path: Path, data: object, said: str) -> None:
    path = _write(tmp_path / "evil chat.json", data)
    with pytest.raises(ChatFileError) as refused:
        read_chat(path)
    assert str(path) in str(refused.value) and said in str(refused.value)


def test_too_many_messages_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "many.json", {"format": "kestrel-chat", "version": 1,
                                           "messages": [0] * (chat_export.MAX_MESSAGES + 1)})
    with pytest.raises(ChatFileError, match="100,001 messages; at most 100,000"):
        read_chat(path)


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as file:
        file.truncate(MAX_BYTES + 1)  # sparse: 256 MiB that take no disk and must not be read
    started = time.monotonic()
    with pytest.raises(ChatFileError, match="too big to be a Kestrel chat"):
        read_chat(path)
    assert time.monotonic() - started < 1


@pytest.mark.parametrize(("raw", "said"), [
    (b"\xff\xfe not utf-8", "not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),  # nesting past the parser's recursion limit
    (b"", "not valid JSON"),
])
def test_files_that_are_not_json_are_refused(tmp_path: Path, raw: bytes, said: str) -> None:
    path = tmp_path / "broken.json"
    path.write_bytes(raw)
    with pytest.raises(ChatFileError, match=said):
        read_chat(path)


def test_a_missing_file_says_it_could_not_be_read(tmp_path: Path) -> None:
    with pytest.raises(ChatFileError, match="could not be read"):
        read_chat(tmp_path / "gone.json")


def test_text_utf8_cannot_hold_becomes_a_replacement_character(tmp_path: Path) -> None:
    path = tmp_path / "surrogate.json"
    path.write_text('{"format": "kestrel-chat", "version": 1, "messages": [{"role": "user", "text": "a\\ud800b"}]}',
                    encoding="utf-8")
    assert read_chat(path).messages[0].text == "a\ufffdb"


def test_the_markdown_heading_is_the_whole_title_not_the_chat_lists_cut(store: HistoryStore) -> None:
    asked = "What is the capital of Australia, and why was it chosen over Sydney and Melbourne?"
    # The title the chat got from its first message, cut for the chat list (app/service/chats/answering.py).
    named = store.create_conversation(asked[:47].rstrip() + "…")
    store.add_message(named.id, Role.USER, asked + "\nAnswer briefly.")
    markdown = to_markdown(store.get_conversation(named.id), store.messages(named.id))
    assert markdown.splitlines()[0] == f"# {asked}"
    assert json.loads(to_json(store.get_conversation(named.id), store.messages(named.id)))["title"].endswith("…")
    # A title the person gave, however long, is kept as they wrote it (on one line).
    own = "My long notes on the capital of Australia… and other things\nsecond line"
    given = store.create_conversation(own)
    store.add_message(given.id, Role.USER, "My long notes on the capital of Australia and more")
    heading = to_markdown(store.get_conversation(given.id), store.messages(given.id)).splitlines()[0]
    assert heading == "# My long notes on the capital of Australia… and other things second line"
