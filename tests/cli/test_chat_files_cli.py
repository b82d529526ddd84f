"""`kestrel export` and `kestrel import` as a user runs them: real processes over the history."""

from __future__ import annotations

import json
from pathlib import Path

from app.core.conversation import Role
from app.core.store.history import HistoryStore
from app.core.paths import data_paths
from tests.cli.test_chat_cli import assert_no_traceback, kestrel


def _saved_chat() -> int:
    with HistoryStore(data_paths().ensure().history_db) as store:
        chat = store.create_conversation("Birds of prey", system_prompt="Be brief.")
        store.add_message(chat.id, Role.USER, "What is a kestrel?")
        store.add_message(chat.id, Role.ASSISTANT, "A small falcon — ünïcode kept.")
        return chat.id


def test_a_chat_exported_as_json_imports_back(tmp_path: Path) -> None:
    chat = _saved_chat()
    listed = kestrel("export")
    assert listed.returncode == 0 and f"{chat}" in listed.stdout and "Birds of prey" in listed.stdout
    target = tmp_path / "bird chat.json"
    exported = kestrel("export", str(chat), "--format", "json", "-o", str(target))
    assert exported.returncode == 0, exported.stderr
    assert json.loads(target.read_text(encoding="utf-8"))["title"] == "Birds of prey"
    imported = kestrel("import", str(target))
    assert imported.returncode == 0 and "as chat" in imported.stderr, imported.stderr
    with HistoryStore(data_paths().history_db) as store:
        chats = store.list_conversations()
        assert [c.title for c in chats] == ["Birds of prey", "Birds of prey"]
        copies = [[(m.role, m.text) for m in store.messages(c.id)] for c in chats]
    assert copies[0] == copies[1] == [(Role.USER, "What is a kestrel?"),
                                      (Role.ASSISTANT, "A small falcon — ünïcode kept.")]


def test_markdown_goes_to_standard_output_without_a_file() -> None:
    chat = _saved_chat()
    result = kestrel("export", str(chat))
    assert result.returncode == 0
    assert result.stdout.startswith("# Birds of prey") and "## You\n\nWhat is a kestrel?" in result.stdout


def test_a_chat_that_is_not_there_and_a_bad_file_are_said_without_a_traceback(tmp_path: Path) -> None:
    _saved_chat()
    missing = kestrel("export", "999")
    assert missing.returncode == 2 and "there is no chat 999" in missing.stderr
    bad = tmp_path / "not a chat.json"
    bad.write_text('{"format": "kestrel-chat", "version": 1, "messages": [{"role": "robot", "text": "x"}]}')
    refused = kestrel("import", str(bad))
    assert refused.returncode == 3 and str(bad) in refused.stderr and "role 'robot'" in refused.stderr
    for result in (missing, refused):
        assert_no_traceback(result)
