"""A chat's documents in chat files: JSON version 3 carries the attached files (with their text), the
answers' sources and the chat's collections, an import checks and bounds each field, Markdown names them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.attachments import (
    MAX_ATTACHED_CHARS,
    MAX_ATTACHMENTS,
    MAX_SOURCES,
    AttachedFile,
    AttachedSection,
    SourceRef,
)
from app.core.chat_export import ChatFileError, read_chat, to_json, to_markdown
from app.core.conversation import Conversation, Message, Role
from app.core.store.history import HistoryStore

REPORT = AttachedFile("/home/ana/Quarterly_report.pdf", "pdf", 48_213,
                      (AttachedSection("Revenue rose.", page=1),
                       AttachedSection("Costs fell.", page=12, heading="Costs")))
NOTES = AttachedFile("C:\\Users\\ana\\notes.md", "markdown", 120, (AttachedSection("Ship it."),), note="guessed cp1252")
SOURCES = (SourceRef(1, REPORT.path, 12, "Costs", "Costs fell."), SourceRef(2, NOTES.path, None, None, "Ship it."))
FILE_DATA = {"path": "a.pdf", "kind": "pdf", "size": 10, "note": "",
             "sections": [{"text": "Hello", "page": 1, "heading": None}]}
SOURCE_DATA = {"number": 1, "path": "a.pdf", "page": 1, "heading": None, "text": "Hello"}


def _chat(store: HistoryStore) -> tuple[Conversation, list[Message]]:
    chat = store.create_conversation("Report", collections=["Work"])
    store.add_message(chat.id, Role.USER, "What fell?", attachments=[REPORT, NOTES])
    answer = store.add_message(chat.id, Role.ASSISTANT, "Costs fell [1].")
    store.update_message(answer.id, sources=SOURCES)
    return store.get_conversation(chat.id), store.messages(chat.id)


def _file(tmp_path: Path, messages: list, version: int = 3, **chat: object) -> Path:
    path = tmp_path / "documents chat.json"
    path.write_text(json.dumps({"format": "kestrel-chat", "version": version, "messages": messages, **chat}),
                    encoding="utf-8")
    return path


def test_a_chat_with_documents_exports_as_version_3_and_imports_back_whole(store: HistoryStore,
                                                                           tmp_path: Path) -> None:
    conversation, messages = _chat(store)
    path = tmp_path / "chat.json"
    path.write_text(to_json(conversation, messages), encoding="utf-8")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert (data["version"], data["collections"]) == (3, ["Work"])
    assert data["messages"][0]["attachments"][1] == {
        "path": NOTES.path, "kind": "markdown", "size": 120, "note": "guessed cp1252",
        "sections": [{"text": "Ship it.", "page": None, "heading": None}]}
    assert "sources" not in data["messages"][0] and "attachments" not in data["messages"][1]
    imported = read_chat(path)
    assert imported.conversation.collections == ("Work",)
    assert [(m.attachments, m.sources) for m in imported.messages] == [(m.attachments, m.sources) for m in messages]
    chat = store.insert_conversation(imported.conversation)
    for message in imported.messages:
        store.insert_message(message, chat)
    assert store.get_conversation(chat).collections == ("Work",)
    assert [(m.attachments, m.sources) for m in store.messages(chat)] == [((REPORT, NOTES), ()), ((), SOURCES)]


def test_a_chat_without_documents_keeps_its_older_version(store: HistoryStore) -> None:
    chat = store.create_conversation("Plain")
    store.add_message(chat.id, Role.USER, "Hi")
    data = json.loads(to_json(store.get_conversation(chat.id), store.messages(chat.id)))
    assert data["version"] == 1 and "collections" not in data and "attachments" not in data["messages"][0]
    store.set_collections(chat.id, ["Work"])  # collections alone make it version 3
    assert json.loads(to_json(store.get_conversation(chat.id), store.messages(chat.id)))["version"] == 3


def test_a_version_2_file_imports_as_it_always_did(tmp_path: Path) -> None:
    # Keys named "attachments", "sources" and "collections" meant nothing in version 2: left alone.
    path = _file(tmp_path, [{"role": "user", "text": "Hi", "attachments": "junk"},
                            {"role": "assistant", "text": "Hello", "sources": [{"number": "one"}]}],
                 version=2, collections={"not": "a list"})
    chat = read_chat(path)
    assert chat.conversation.collections == ()
    assert [(m.text, m.attachments, m.sources) for m in chat.messages] == [("Hi", (), ()), ("Hello", (), ())]


def _user(**fields: object) -> dict:
    return {"role": "user", "text": "x", **fields}


def _answer(**fields: object) -> dict:
    return {"role": "assistant", "text": "x", **fields}


@pytest.mark.parametrize(("message", "said"), [
    (_user(attachments={"path": "a"}), "message 1's attachments must be a list"),
    (_user(attachments=["a.pdf"]), "message 1's attachment 1 is not an object"),
    (_user(attachments=[dict(FILE_DATA, path=5)]), "attachment 1's path must be a text (got int)"),
    (_user(attachments=[dict(FILE_DATA, path="")]), "attachment 1's path must not be empty"),
    (_user(attachments=[dict(FILE_DATA, path="a\0b")]), "attachment 1's path holds a NUL character"),
    (_user(attachments=[dict(FILE_DATA, kind="pdf\nrm")]), "attachment 1's kind holds a control character"),
    (_user(attachments=[dict(FILE_DATA, size=True)]), "attachment 1's size must be a whole number"),
    (_user(attachments=[dict(FILE_DATA, size=1.5)]), "attachment 1's size must be a whole number"),
    (_user(attachments=[dict(FILE_DATA, note="n" * 1_001)]), "attachment 1's note is 1,001 characters long"),
    (_user(attachments=[dict(FILE_DATA, sections={"text": "x"})]), "attachment 1's sections must be a list"),
    (_user(attachments=[dict(FILE_DATA, sections=[{"text": 5}])]), "section 1's text must be a text"),
    (_user(attachments=[dict(FILE_DATA, sections=[{"text": "x", "page": 0}])]), "section 1's page must be a whole"),
    (_user(attachments=[dict(FILE_DATA, sections=[{"text": "x", "heading": ["a"]}])]),
     "section 1's heading must be a text"),
    (_user(attachments=[dict(FILE_DATA, sections=[{"text": "x" * MAX_ATTACHED_CHARS}, {"text": "y"}])]),
     "attachment 1 holds more than 5,000,000 characters of text"),
    (_user(attachments=[FILE_DATA] * (MAX_ATTACHMENTS + 1)), "message 1's attachments are 101; at most 100"),
    (_answer(attachments=[FILE_DATA]), "message 1 (assistant) has attachments; only the user's"),
    (_answer(sources="[1]"), "message 1's sources must be a list"),
    (_answer(sources=[dict(SOURCE_DATA, number=0)]), "source 1's number must be a whole number from 1"),
    (_answer(sources=[dict(SOURCE_DATA, number="1")]), "source 1's number must be a whole number"),
    (_answer(sources=[SOURCE_DATA, SOURCE_DATA]), "message 1 has two sources numbered 1"),
    (_answer(sources=[dict(SOURCE_DATA, text=None)]), "source 1's text must be a text"),
    (_answer(sources=[dict(SOURCE_DATA, text="x" * (MAX_ATTACHED_CHARS + 1))]), "source 1's text is 5,000,001"),
    (_answer(sources=[dict(SOURCE_DATA, number=n) for n in range(1, MAX_SOURCES + 2)]), "are 101; at most 100"),
    (_user(sources=[SOURCE_DATA]), "message 1 (user) has sources; only an assistant's answer"),
])
def test_a_version_3_file_with_a_wrong_document_is_refused_naming_it(tmp_path: Path, message: dict,
                                                                     said: str) -> None:
    path = _file(tmp_path, [message])
    with pytest.raises(ChatFileError) as refused:
        read_chat(path)
    assert str(path) in str(refused.value) and said in str(refused.value), refused.value


@pytest.mark.parametrize(("collections", "said"), [
    ("Work", "the chat's collections must be a list"),
    ([5], "the chat's collection 1 must be a text"),
    (["Work", "Work"], "names the collection 'Work' twice"),
    ([""], "collection 1 must not be empty"),
    (["w" * 1_001], "collection 1 is 1,001 characters long"),
])
def test_a_version_3_file_with_wrong_collections_is_refused(tmp_path: Path, collections: object, said: str) -> None:
    path = _file(tmp_path, [], collections=collections)
    with pytest.raises(ChatFileError, match=said):
        read_chat(path)


def test_markdown_names_the_attached_files_and_the_answers_sources(store: HistoryStore) -> None:
    markdown = to_markdown(*_chat(store))
    assert "## You\n\nWhat fell?\n\n*Attached:* Quarterly\\_report.pdf, notes.md\n\n## Assistant" in markdown
    assert ("Costs fell [1].\n\n*Sources:* [1] Quarterly\\_report.pdf, p. 12, Costs · [2] notes.md\n"
            in markdown)
    assert "Revenue rose" not in markdown  # the files' text stays in the JSON export
