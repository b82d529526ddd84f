"""The Memory window over the real service and history file: the list, add, edit, turn off, delete, clear, the settings."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction

from app.core.memories import MAX_MEMORY_CHARS, MemoryOrigin
from app.core.memory_settings import MemoryProposal
from app.ui.memory.memory_table import KEPT, ORIGIN, TEXT
from app.ui.memory.memory_window import MemoryWindow, clear_question
from app.ui.memory.memory_words import kept_words
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import idle, run, until

ADA = "My daughter is called Ada."
SHORT = "I prefer short answers."


@pytest.fixture
def window(make_window):
    return make_window(engine=ScriptedEngine())


def open_memory(window) -> MemoryWindow:
    window.findChild(QAction, "showMemory").trigger()
    shown = window.memory.window
    assert shown is not None and shown.isVisible()
    return shown


def rows(shown: MemoryWindow) -> list[list[str]]:
    model = shown.model
    return [[model.index(row, column).data() for column in (TEXT, KEPT, ORIGIN)] for row in range(model.rowCount())]


def listed(loop, window) -> list[tuple[str, bool]]:
    return [(memory.text, memory.enabled) for memory in run(loop, window.doors.memory.listing())]


def settled(loop, shown: MemoryWindow, what: str, predicate) -> None:
    run(loop, until(lambda: not shown._loading and predicate(), timeout=20, what=what))


def test_the_list_shows_when_and_where_each_memory_came_from_and_follows_other_changes(window, loop) -> None:
    doors = window.doors
    assert doors.chat.send("We are going to Lisbon in May")
    run(loop, until(idle(window)))
    chat = doors.chat.conversation
    ada = run(loop, doors.memory.add(ADA, MemoryOrigin.TOOL, chat.id)).memory
    shown = open_memory(window)
    settled(loop, shown, "the list", lambda: shown.model.rowCount() == 1)
    assert rows(shown) == [[ADA, kept_words(ada.created), f"Asked in “{chat.title}”"]]
    assert shown.stack.currentWidget() is shown.table
    assert shown.count.text().strip() == "1 memory"

    # The model's remember tool, or another part of Kestrel, adds one: the open list follows.
    run(loop, doors.memory.add(SHORT, MemoryOrigin.CLI))
    settled(loop, shown, "the added memory", lambda: shown.model.rowCount() == 2)
    assert rows(shown)[1][2] == "Added with kestrel memory"
    # Cleared elsewhere: the empty page, with what to do.
    run(loop, doors.memory.clear())
    settled(loop, shown, "the cleared list", lambda: shown.model.rowCount() == 0)
    assert shown.stack.currentWidget() is shown.empty
    assert not shown.clear.isEnabled() and not shown.delete.isEnabled()


def test_add_edit_turn_off_and_on_delete_and_clear_all_go_through_the_door(window, loop) -> None:
    shown = open_memory(window)
    settled(loop, shown, "the empty list", lambda: True)
    typed = iter([ADA, SHORT, "My daughter is called Ada Lovelace."])
    shown.ask_text = lambda title, text: next(typed)  # type: ignore[method-assign]
    shown.add.click()
    settled(loop, shown, "the first memory", lambda: shown.model.rowCount() == 1)
    shown.add.click()
    settled(loop, shown, "the second memory", lambda: shown.model.rowCount() == 2)
    assert shown.selected() is not None and shown.selected().text == SHORT, "the one added is selected"
    assert rows(shown)[1][2] == "Added by hand"

    shown.table.selectRow(0)
    shown.edit.click()
    settled(loop, shown, "the edit", lambda: rows(shown)[0][0] == "My daughter is called Ada Lovelace.")
    assert listed(loop, window) == [("My daughter is called Ada Lovelace.", True), (SHORT, True)]

    shown.switch.click()
    settled(loop, shown, "turned off", lambda: not shown.model.memory(0).enabled)
    assert shown.switch.text() == "Turn o&n"
    assert shown.model.index(0, TEXT).data(Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Unchecked
    assert "1 turned off" in shown.count.text()
    assert listed(loop, window)[0] == ("My daughter is called Ada Lovelace.", False)
    # Its tick turns it on again, as the button does.
    assert not shown.model.setData(shown.model.index(0, TEXT), Qt.CheckState.Checked, Qt.ItemDataRole.CheckStateRole)
    settled(loop, shown, "turned on", lambda: shown.model.memory(0).enabled)
    assert listed(loop, window)[0][1]

    asked: list[str] = []
    answers = iter([False, True])
    shown.confirm = lambda question: asked.append(question) or next(answers)  # type: ignore[method-assign]
    shown.delete.click()  # declined: nothing is forgotten
    run(loop, until(lambda: len(asked) == 1))
    assert len(listed(loop, window)) == 2
    shown.delete.click()
    settled(loop, shown, "the delete", lambda: shown.model.rowCount() == 1)
    assert "Ada Lovelace" in asked[0] and "cannot be undone" in asked[0]
    assert listed(loop, window) == [(SHORT, True)]

    shown.confirm = lambda question: asked.append(question) or True  # type: ignore[method-assign]
    shown.clear.click()
    settled(loop, shown, "the clear", lambda: shown.model.rowCount() == 0)
    assert asked[-1] == clear_question(1)
    assert listed(loop, window) == []


def test_a_refused_memory_is_said_in_plain_words_and_the_next_change_clears_it(window, loop) -> None:
    shown = open_memory(window)
    settled(loop, shown, "the empty list", lambda: True)
    typed = iter(["   ", "x" * (MAX_MEMORY_CHARS + 1), ADA])
    shown.ask_text = lambda title, text: next(typed)  # type: ignore[method-assign]
    shown.add.click()
    run(loop, until(lambda: shown.problem.isVisible(), what="the refusal"))
    assert shown.problem.text.text().startswith("That memory is empty")
    shown.add.click()
    run(loop, until(lambda: "1,001 characters" in shown.problem.text.text(), what="the second refusal"))
    assert shown.model.rowCount() == 0
    shown.add.click()
    settled(loop, shown, "the memory", lambda: shown.model.rowCount() == 1)
    run(loop, until(lambda: not shown.problem.isVisible(), what="the refusal to go"))


def test_the_text_dialog_counts_and_refuses_ok_past_the_limit(window) -> None:
    from PySide6.QtWidgets import QDialogButtonBox

    from app.ui.memory.memory_parts import MemoryTextDialog

    dialog = MemoryTextDialog("Add a memory", "", window)
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    assert not ok.isEnabled()
    dialog.edit.setPlainText(ADA)
    assert ok.isEnabled() and dialog.count.text() == f"26 of {MAX_MEMORY_CHARS:,} characters"
    dialog.edit.setPlainText("y" * (MAX_MEMORY_CHARS + 5))
    assert not ok.isEnabled() and "too long" in dialog.count.text()


def test_the_memory_settings_are_saved_at_once_and_follow_a_change_made_elsewhere(window, loop) -> None:
    shown = open_memory(window)
    form = shown.settings_form
    door = window.doors.settings
    assert form.enabled.isChecked() and form.propose.currentData() == "ask" and not form.api.isChecked()
    form.api.setChecked(True)
    run(loop, until(lambda: door.settings.memory.api_uses_memory, what="the API setting saved"))
    form.propose.setCurrentIndex(form.propose.findData("off"))
    run(loop, until(lambda: door.settings.memory.propose is MemoryProposal.OFF, what="propose saved"))
    form.enabled.setChecked(False)
    run(loop, until(lambda: not door.settings.memory.enabled, what="memory off saved"))
    assert not form.propose.isEnabled() and not form.api.isEnabled()
    assert door.settings.memory.api_uses_memory, "the others are kept while memory is off"

    on_again = dataclasses.replace(door.settings.memory, enabled=True, propose=MemoryProposal.ASK)
    run(loop, door.update_settings(dataclasses.replace(door.settings, memory=on_again)))
    run(loop, until(lambda: form.enabled.isChecked(), what="the form to follow"))
    assert form.propose.currentData() == "ask" and form.propose.isEnabled()
