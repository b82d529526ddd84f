"""A message's Remember: its icon and menu open a dialog with the message's text (or the part selected), the
person edits it down and it is kept as a memory from that message's chat; a refusal is said in the dialog with
the text as typed; no Remember where memory is off or the chat is temporary."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor

from app.core.memories import MAX_MEMORY_CHARS, MemoryOrigin
from app.core.memory_settings import MemorySettings
from app.ui.messages.remember_dialog import RememberDialog
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import idle, run, until

QUESTION = "My daughter Ada starts school on Monday, what should she pack?"


@pytest.fixture
def window(make_window, loop):
    made = make_window(engine=ScriptedEngine())
    assert made.doors.chat.send(QUESTION)
    run(loop, until(idle(made)))
    run(loop, until(lambda: made.adapter.messages.rowCount() == 2
                    and made.adapter.messages.messages()[-1].state.value != "streaming", what="the answer shown"))
    return made


def _click_remember(window, qtbot, row: int) -> RememberDialog:
    index = window.adapter.messages.index(row)
    window.messages.scrollTo(index)
    remember = dict(window.messages.delegate.action_rects(index))["remember"]
    qtbot.mouseClick(window.messages.viewport(), Qt.MouseButton.LeftButton, pos=remember.center())
    dialog = window.remember_dialog
    assert dialog is not None and dialog.isVisible()
    return dialog


def test_remember_on_the_persons_message_keeps_the_fact_edited_down_from_its_chat(window, loop, qtbot) -> None:
    dialog = _click_remember(window, qtbot, 0)
    assert dialog.text() == QUESTION, "it starts from the message's text"
    dialog.editor.setPlainText("My daughter is called Ada.")
    accepted: list[bool] = []
    dialog.accepted.connect(lambda: accepted.append(True))
    dialog.remember_button.click()
    run(loop, until(lambda: accepted, what="the dialog closed"))
    memories = run(loop, window.doors.memory.listing())
    assert [(m.text, m.origin, m.conversation_id) for m in memories] == \
        [("My daughter is called Ada.", MemoryOrigin.MESSAGE, window.doors.chat.conversation.id)]


def test_a_refusal_is_said_in_the_dialog_and_the_text_stays_as_typed(window, loop, qtbot) -> None:
    dialog = _click_remember(window, qtbot, 1)
    assert dialog.text() == window.adapter.messages.messages()[1].text.strip(), "an answer's text too"
    long_text = "I like " + "very " * MAX_MEMORY_CHARS + "short answers."
    dialog.editor.setPlainText(long_text)
    dialog.remember_button.click()
    run(loop, until(lambda: dialog.problem.isVisibleTo(dialog), what="the refusal said"))
    assert "a memory holds at most 1,000" in dialog.problem.text.text()
    assert dialog.isVisible() and dialog.text() == long_text and dialog.remember_button.isEnabled()
    assert run(loop, window.doors.memory.listing()) == []
    dialog.editor.setPlainText("")
    dialog.remember_button.click()
    run(loop, until(lambda: "That memory is empty" in dialog.problem.text.text(), what="the empty one refused"))
    dialog.reject()
    assert run(loop, window.doors.memory.listing()) == []


def test_remember_starts_from_the_text_selected_in_the_message(window, loop, qtbot) -> None:
    index = window.adapter.messages.index(0)
    editor = window.messages.open_selection(index)
    cursor = editor.textCursor()
    cursor.setPosition(QUESTION.index("Ada"))
    cursor.setPosition(QUESTION.index(", what"), QTextCursor.MoveMode.KeepAnchor)
    editor.setTextCursor(cursor)
    dialog = _click_remember(window, qtbot, 0)
    assert dialog.text() == "Ada starts school on Monday"


def test_the_menu_offers_remember_and_memory_off_takes_it_away(window, loop, qtbot) -> None:
    window.messages.setCurrentIndex(window.adapter.messages.index(0))
    window.messages.remember_current()  # what the menu's Remember… and Ctrl+Shift+R do
    assert window.remember_dialog is not None and window.remember_dialog.text() == QUESTION
    window.remember_dialog.reject()
    settings = window.doors.settings
    run(loop, settings.update_settings(dataclasses.replace(settings.settings,
                                                           memory=MemorySettings(enabled=False))))
    run(loop, until(lambda: "remember" not in window.messages.delegate.offered, what="Remember withdrawn"))
    assert "remember" not in dict(window.messages.delegate.action_rects(window.adapter.messages.index(0)))
