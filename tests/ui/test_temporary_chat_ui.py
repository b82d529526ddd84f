"""The window's temporary chat: started from the New chat button's menu or File, said in the sidebar and the
empty chat, answered without memory, never listed, and gone from memory and the history file once left."""

from __future__ import annotations

import sqlite3

import pytest
from PySide6.QtWidgets import QLabel, QMenu

from app.core.memories import MemoryOrigin
from app.core.paths import data_paths
from app.ui.chat.sidebar import TEMPORARY_LINE
from app.ui.messages.message_view import TEMPORARY_WORDS
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import idle, run, service_of, until

QUESTION = "Plan a surprise party for my temporary friend"


@pytest.fixture
def window(make_window, loop):
    made = make_window(engine=ScriptedEngine())
    run(loop, made.doors.memory.add("My daughter is called Ada.", MemoryOrigin.HAND))
    return made


def _file_holds(text: str) -> int:
    with sqlite3.connect(data_paths().history_db) as conn:
        return conn.execute("SELECT count(*) FROM messages WHERE text LIKE ?", (f"%{text}%",)).fetchone()[0]


def _menu_action(window, text: str):
    return next(a for a in window.menuBar().findChildren(QMenu)[0].actions() if a.text().replace("&", "") == text)


def test_a_temporary_chat_is_said_answered_without_memory_and_leaves_no_trace(window, loop, qtbot) -> None:
    sidebar = window.sidebar
    menu = sidebar.new_menu_button.menu()
    assert [a.text() for a in menu.actions()] == ["New temporary chat"]
    assert not sidebar.temporary_line.isVisibleTo(sidebar)
    sidebar.temporary_action.trigger()
    run(loop, until(lambda: window.doors.chat.temporary, what="the temporary chat shown"))
    assert sidebar.temporary_line.isVisibleTo(sidebar)
    assert sidebar.temporary_line.findChild(QLabel, "temporaryChatWords").text() == TEMPORARY_LINE
    assert window.messages.empty_words.startswith(TEMPORARY_WORDS)
    assert "remember" not in window.messages.delegate.offered, "nothing to remember from a chat that leaves no trace"
    assert window.windowTitle().startswith("Temporary chat")

    window.composer.edit.setPlainText(QUESTION)
    assert window.doors.chat.send(window.composer.edit.toPlainText())
    run(loop, until(idle(window)))
    run(loop, until(lambda: window.adapter.messages.rowCount() == 2, what="the exchange shown"))
    answer = window.adapter.messages.messages()[-1]
    assert answer.text and answer.memories == (), "no memory given to a temporary chat's answer"
    assert window.adapter.conversations.rowCount() == 0, "never in the chat list"
    assert _file_holds("temporary friend") == 0

    window.composer.edit.setPlainText("a draft typed here is not kept")
    _menu_action(window, "New chat").trigger()
    run(loop, until(lambda: not window.doors.chat.temporary and window.doors.chat.conversation is None,
                    what="a new chat"))
    assert not sidebar.temporary_line.isVisibleTo(sidebar)
    assert not window.messages.empty_words.startswith(TEMPORARY_WORDS)
    assert "remember" in window.messages.delegate.offered
    assert window.adapter.conversations.rowCount() == 0
    assert window.doors.history.drafted_ids == frozenset()
    run(loop, until(lambda: not service_of(window).temporary._kept, what="the chat discarded"))
    run(loop, service_of(window).drafts.flush())
    assert _file_holds("temporary friend") == 0
    with sqlite3.connect(data_paths().history_db) as conn:
        assert conn.execute("SELECT count(*) FROM conversations").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM drafts").fetchone()[0] == 0


def test_file_new_temporary_chat_has_its_shortcut_and_choosing_a_saved_chat_leaves_it(window, loop) -> None:
    action = _menu_action(window, "New temporary chat")
    assert action.shortcut().toString() == "Ctrl+Shift+N"
    assert window.doors.chat.send("A chat to keep")
    run(loop, until(idle(window)))
    saved = window.doors.chat.conversation.id
    action.trigger()
    run(loop, until(lambda: window.doors.chat.temporary, what="the temporary chat shown"))
    assert window.sidebar.conversation_list.selectionModel().selectedIndexes() == []
    window.sidebar.conversationChosen.emit(saved)
    run(loop, until(lambda: window.doors.chat.conversation is not None and window.doors.chat.conversation.id == saved,
                    what="the saved chat shown"))
    assert not window.sidebar.temporary_line.isVisibleTo(window.sidebar)
    assert window.adapter.conversations.rowCount() == 1


def test_delete_chat_on_a_temporary_chat_leaves_it_without_asking(window, loop, monkeypatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(type(window), "confirm", lambda self, question: asked.append(question) or True)
    _menu_action(window, "New temporary chat").trigger()
    run(loop, until(lambda: window.doors.chat.temporary, what="the temporary chat shown"))
    window.delete_open_chat()
    run(loop, until(lambda: window.doors.chat.conversation is None, what="a new chat"))
    assert asked == [] and not window.sidebar.temporary_line.isVisibleTo(window.sidebar)
