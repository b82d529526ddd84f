"""A chat imported or deleted by another Kestrel process shows in the open window without a restart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.core.paths import data_paths
from tests.ui.conftest import run, with_generation

ROOT = Path(__file__).resolve().parents[2]


def other_kestrel(qtbot, *args: str) -> None:
    """A second process over this test's KESTREL_HOME; the window's loop keeps running meanwhile."""
    with subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True) as child:
        qtbot.waitUntil(lambda: child.poll() is not None, timeout=60_000)
        _, errors = child.communicate()
    assert child.returncode == 0, errors


@pytest.mark.slow
def test_an_import_by_another_process_appears_and_the_selection_stays(make_window, loop, qtbot, tmp_path) -> None:
    window = make_window(model=None)
    with_generation(window, loop, max_tokens=8)  # a saved chat, open and selected
    opened = window.doors.chat.conversation
    assert opened is not None
    exported = tmp_path / "chat.json"
    assert run(loop, window.doors.files.export_conversation(opened.id, exported, "json"))
    assert window.adapter.conversations.rowCount() == 1

    other_kestrel(qtbot, "-m", "app", "import", str(exported))
    qtbot.waitUntil(lambda: window.adapter.conversations.rowCount() == 2, timeout=5000)
    current = window.conversation_list.currentIndex()
    assert current.isValid() and window.filter.mapToSource(current).row() == window.adapter.conversations.row_of(
        opened.id)
    assert window.doors.chat.conversation is not None and window.doors.chat.conversation.id == opened.id


@pytest.mark.slow
def test_the_open_chat_renamed_or_deleted_elsewhere_follows(make_window, loop, qtbot) -> None:
    window = make_window(model=None)
    with_generation(window, loop, max_tokens=8)
    opened = window.doors.chat.conversation
    assert opened is not None
    db = str(data_paths().history_db)
    store = "from app.core.store.history import HistoryStore; import sys; s = HistoryStore(sys.argv[1]); "
    other_kestrel(qtbot, "-c", store + "s.rename_conversation(int(sys.argv[2]), 'Renamed elsewhere')", db,
                  str(opened.id))
    qtbot.waitUntil(lambda: window.header.title.full_text() == "Renamed elsewhere", timeout=5000)

    other_kestrel(qtbot, "-c", store + "s.delete_conversation(int(sys.argv[2]))", db, str(opened.id))
    qtbot.waitUntil(lambda: window.adapter.conversations.rowCount() == 0, timeout=5000)
    qtbot.waitUntil(lambda: window.doors.chat.conversation is None, timeout=5000)


@pytest.mark.slow
def test_a_chat_saved_by_kestrel_chat_appears_in_the_open_window(make_window, loop, qtbot, tiny_model) -> None:
    window = make_window(model=None)
    assert window.adapter.conversations.rowCount() == 0
    other_kestrel(qtbot, "-m", "app", "chat", "--model", str(tiny_model), "--max-tokens", "4", "--ctx", "512",
                  "--save", "Saved from a terminal")
    qtbot.waitUntil(lambda: window.adapter.conversations.rowCount() == 1, timeout=5000)
    assert window.doors.chat.conversation is None  # the window's own new chat stays open
