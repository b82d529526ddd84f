"""Answers that used tools in chat files: Markdown that shows each call and its result, JSON
version 2 that keeps the parts, and an import that checks every field of every part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core import chat_export
from app.core.chat_export import ChatFileError, read_chat, to_json, to_markdown
from app.core.conversation import MessageState, Role, TextPart, ToolCallPart, ToolResultPart, joined_text
from app.core.store.history import HistoryStore
from app.core.message_parts import MAX_PARTS

CALL = ToolCallPart("call_1", "time", "get_current_time", '{"timezone":"Europe/Paris"}')
PARTS = (TextPart("Let me look."), CALL, ToolResultPart("call_1", "14:05"), TextPart("It is 14:05 in Paris."))
CALL_DATA = {"type": "tool_call", "call_id": "call_1", "server": "time", "name": "get_current_time",
             "arguments": '{"timezone":"Europe/Paris"}'}


def _chat(store: HistoryStore, parts: tuple = PARTS, state: MessageState = MessageState.COMPLETE):
    chat = store.create_conversation("Paris time")
    store.add_message(chat.id, Role.USER, "What time is it in Paris?")
    store.add_message(chat.id, Role.ASSISTANT, joined_text(parts), parts=parts, state=state)
    return store.get_conversation(chat.id), store.messages(chat.id)


def _file(tmp_path: Path, messages: list, version: int = 2) -> Path:
    path = tmp_path / "tools chat.json"
    path.write_text(json.dumps({"format": "kestrel-chat", "version": version, "messages": messages}),
                    encoding="utf-8")
    return path


def test_a_chat_with_tools_exports_as_version_2_and_imports_back_with_its_parts(
        store: HistoryStore, tmp_path: Path) -> None:
    conversation, messages = _chat(store)
    path = tmp_path / "chat.json"
    path.write_text(to_json(conversation, messages), encoding="utf-8")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == 2 and "parts" not in data["messages"][0]
    assert data["messages"][1]["parts"] == [
        {"type": "text", "text": "Let me look."}, CALL_DATA,
        {"type": "tool_result", "call_id": "call_1", "text": "14:05", "is_error": False, "denied": False},
        {"type": "text", "text": "It is 14:05 in Paris."}]
    imported = read_chat(path)
    assert [(m.role, m.text, m.parts) for m in imported.messages] == [(m.role, m.text, m.parts) for m in messages]
    chat = store.insert_conversation(imported.conversation)
    for message in imported.messages:
        store.insert_message(message, chat)
    assert store.messages(chat)[1].parts == PARTS


def test_a_version_1_file_imports_as_it_always_did(tmp_path: Path) -> None:
    # A key named "parts" meant nothing in version 1: it is left alone, not read.
    path = _file(tmp_path, [{"role": "user", "text": "Hi"},
                            {"role": "assistant", "text": "Hello", "parts": [{"type": "video"}]}], version=1)
    assert [(m.text, m.parts) for m in read_chat(path).messages] == [("Hi", ()), ("Hello", ())]


def _answer(parts: object) -> dict:
    return {"role": "assistant", "text": "x", "parts": parts}


@pytest.mark.parametrize(("message", "said"), [
    (_answer({"type": "text"}), "message 1's parts must be a list"),
    (_answer(["text"]), "message 1's part 1 is not an object"),
    (_answer([{"type": "image", "data": "..."}]), "message 1's part 1 has type 'image'; it must be text, tool_call"),
    (_answer([{"type": "x" * 100}]), "has type 'xxxxxxxx"),
    (_answer([{"type": "text", "text": 5}]), "message 1's part 1's text must be a text"),
    (_answer([dict(CALL_DATA, call_id=None)]), "part 1's call_id must be a text"),
    (_answer([dict(CALL_DATA, call_id="")]), "part 1's call_id must not be empty"),
    (_answer([dict(CALL_DATA, server=["time"])]), "part 1's server must be a text"),
    (_answer([dict(CALL_DATA, name="a" * 1_001)]), "part 1's name is 1,001 characters long; at most 1,000"),
    (_answer([dict(CALL_DATA, name="now\u0007")]), "part 1's name must be one line"),
    (_answer([dict(CALL_DATA, arguments={"timezone": "UTC"})]), "part 1's arguments must be a text"),
    (_answer([dict(CALL_DATA, arguments='"UTC"')]), "part 1's arguments must be the text of a JSON object"),
    (_answer([CALL_DATA, CALL_DATA]), "message 1 has two calls with the id 'call_1'"),
    (_answer([{"type": "tool_result", "call_id": "call_1", "text": "14:05"}]), "no call made before it"),
    (_answer([CALL_DATA, {"type": "tool_result", "call_id": "call_1", "text": "a", "is_error": "yes"}]),
     "part 2's is_error must be true or false"),
    (_answer([CALL_DATA, {"type": "tool_result", "call_id": "call_1", "text": "a", "denied": 1}]),
     "part 2's denied must be true or false"),
    (_answer([CALL_DATA, {"type": "tool_result", "call_id": "call_1"}]), "part 2's text must be a text"),
    (_answer([{"type": "text", "text": ""}] * (MAX_PARTS + 1)), "10,001 parts; at most 10,000"),
    ({"role": "user", "text": "x", "parts": [{"type": "text", "text": "x"}]},
     "message 1 is a user message with parts; only an assistant's answer has them"),
    ({"role": "tool", "text": "14:05", "tool_call_id": "call_1"}, "message 1 has role 'tool'"),
])
def test_a_version_2_file_with_a_wrong_part_is_refused_naming_it(tmp_path: Path, message: dict, said: str) -> None:
    path = _file(tmp_path, [message])
    with pytest.raises(ChatFileError) as refused:
        read_chat(path)
    assert str(path) in str(refused.value) and said in str(refused.value), refused.value


def test_a_version_2_file_over_the_size_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chat_export, "MAX_BYTES", 10_000)
    result = {"type": "tool_result", "call_id": "call_1", "text": "x" * 20_000}
    path = _file(tmp_path, [_answer([CALL_DATA, result])])
    with pytest.raises(ChatFileError, match="too big to be a Kestrel chat"):
        read_chat(path)


def test_markdown_shows_each_call_with_its_result_between_the_texts(store: HistoryStore) -> None:
    markdown = to_markdown(*_chat(store))
    assert ("## Assistant\n\nLet me look.\n\n"
            '> Called `get_current_time({"timezone":"Europe/Paris"})` on time → `14:05`\n\n'
            "It is 14:05 in Paris.\n") in markdown


def test_markdown_cuts_a_long_result_with_a_note(store: HistoryStore) -> None:
    lines = "\n".join(f"line {n} ```" for n in range(1, 1_001))
    parts = (CALL, ToolResultPart("call_1", lines), TextPart("Done."))
    markdown = to_markdown(*_chat(store, parts))
    shown = "\n".join(f"> line {n} ```" for n in range(1, 31))
    assert ('> Called `get_current_time({"timezone":"Europe/Paris"})` on time → result:\n>\n'
            f"> ````\n{shown}\n> ````\n>\n> *Cut here: ") in markdown
    assert "line 31 " not in markdown
    rest = len(lines) - len("\n".join(lines.split("\n")[:30]))
    assert f"*Cut here: 970 more lines ({rest:,} characters) of the result, kept whole in the JSON export.*\n\nDone.\n" in markdown


def test_markdown_cuts_a_result_of_one_long_line_too(store: HistoryStore) -> None:
    parts = (CALL, ToolResultPart("call_1", "y" * 5_000))
    markdown = to_markdown(*_chat(store, parts))
    assert f"> ```\n> {'y' * 2_000}\n> ```\n>\n> *Cut here: 3,000 more characters of the result, kept whole" in markdown


@pytest.mark.parametrize(("result", "said"), [
    (ToolResultPart("call_1", "Europe/Pariss is no time zone", is_error=True),
     "→ failed: `Europe/Pariss is no time zone`"),
    (ToolResultPart("call_1", "The user refused this call.", denied=True), "→ denied by the user"),
    (ToolResultPart("call_1", "   "), "→ (nothing)"),
    (None, "→ no result (the answer was stopped)"),
])
def test_markdown_says_how_a_call_ended(store: HistoryStore, result: ToolResultPart | None, said: str) -> None:
    parts = (CALL,) if result is None else (CALL, result)
    markdown = to_markdown(*_chat(store, parts, MessageState.INTERRUPTED))
    assert f'> Called `get_current_time({{"timezone":"Europe/Paris"}})` on time {said}\n' in markdown


def test_markdown_cuts_long_arguments_and_keeps_backticks_as_code(store: HistoryStore) -> None:
    call = ToolCallPart("c", "files", "write_file", json.dumps({"path": "a.md", "text": "`x` " * 200}))
    markdown = to_markdown(*_chat(store, (call, ToolResultPart("c", "ok"))))
    assert '> Called ``write_file({"path": "a.md", "text": "`x` `x` ' in markdown
    assert ("…)`` on files → `ok`\n>\n> *The arguments are cut here: "
            f"{len(call.arguments):,} characters in all") in markdown
    assert len(call.arguments) > 800
