"""Kestrel's proposals after a chat in the real window (scripted engine, real service and history): the row above the
composer, Remember / Edit… / Not now, the automatic notice's Undo; and Settings' Memory page."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog

from app.core.memories import MemoryOrigin
from app.core.memory_settings import MemoryProposal, MemorySettings
from app.ui.memory.memory_words import kept_notice, proposal_question
from app.ui.memory.proposal_row import MemoryProposalRow
from app.ui.settings.dialogs import SettingsDialog
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import idle, run, service_of, until

TOLD = "My daughter is called Ada. I live in Oslo."
FACTS = Script(text=(json.dumps({"facts": ["My daughter is called Ada.", "I live in Oslo."]}),), endless=False)
REPLY = Script(text=("Noted", "."), endless=False)


@pytest.fixture
def window(make_window):
    window = make_window(engine=ScriptedEngine())
    proposals = service_of(window).memory_proposals
    proposals.idle_s, proposals.settle_s = 0.05, 0.01  # the window waits IDLE_S after an answer
    return window


def _told(window, loop, propose: MemoryProposal = MemoryProposal.ASK) -> MemoryProposalRow:
    settings = window.doors.settings
    run(loop, settings.update_settings(dataclasses.replace(settings.settings,
                                                           memory=MemorySettings(propose=propose))))
    service_of(window).session.client.scripts.extend([REPLY, FACTS])
    assert window.doors.chat.send(TOLD)
    run(loop, until(idle(window)))
    row = window.chat.proposal
    run(loop, until(lambda: row.isVisible(), what="the proposal row"))
    return row


def _listed(window, loop) -> list[tuple[str, MemoryOrigin]]:
    return [(m.text, m.origin) for m in run(loop, window.doors.memory.listing())]


def _until_listed(window, loop, wanted, what: str) -> None:
    """Until the memories kept are `wanted` (read between waits, never inside one)."""
    for _ in range(400):
        if _listed(window, loop) == wanted:
            return
        run(loop, asyncio.sleep(0.05))
    raise AssertionError(f"timed out waiting for {what}: {_listed(window, loop)}")


def test_the_row_asks_and_remember_or_edit_keeps_the_fact_from_its_chat(window, loop, qtbot) -> None:
    row = _told(window, loop)
    assert row.question.text() == "Remember that your daughter is called Ada?"
    assert row.more.text() == f"From “{window.doors.chat.conversation.title}” · 1 more after this"
    assert row.remember.isVisible() and row.edit.isVisible() and row.not_now.isVisible() and not row.undo.isVisible()
    assert _listed(window, loop) == [], "nothing is kept before the person's yes"
    assert window.composer.edit.isEnabled(), "not modal: the chat goes on"

    qtbot.mouseClick(row.remember, Qt.MouseButton.LeftButton)
    _until_listed(window, loop, [("My daughter is called Ada.", MemoryOrigin.PROPOSED)], "Ada kept")
    [ada] = run(loop, window.doors.memory.listing())
    assert (ada.text, ada.origin, ada.conversation_id) == \
        ("My daughter is called Ada.", MemoryOrigin.PROPOSED, window.doors.chat.conversation.id)
    run(loop, until(lambda: row.question.text() == "Remember that you live in Oslo?", what="the next proposal"))
    assert row.more.text() == f"From “{window.doors.chat.conversation.title}”"

    row.ask_text = lambda text: text.replace("Oslo", "Oslo, Norway")
    qtbot.mouseClick(row.edit, Qt.MouseButton.LeftButton)
    run(loop, until(lambda: not row.isVisible(), what="the row gone once all are answered"))
    assert _listed(window, loop) == [("My daughter is called Ada.", MemoryOrigin.PROPOSED),
                                     ("I live in Oslo, Norway.", MemoryOrigin.PROPOSED)]


def test_not_now_keeps_nothing(window, loop, qtbot) -> None:
    row = _told(window, loop)
    qtbot.mouseClick(row.not_now, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(row.not_now, Qt.MouseButton.LeftButton)
    run(loop, until(lambda: not row.isVisible(), what="the row gone"))
    assert _listed(window, loop) == [] and window.doors.memory.proposals() == []


def test_automatic_says_what_it_kept_and_undo_forgets_it(window, loop, qtbot) -> None:
    row = _told(window, loop, MemoryProposal.AUTOMATIC)
    _until_listed(window, loop, [("My daughter is called Ada.", MemoryOrigin.PROPOSED),
                                 ("I live in Oslo.", MemoryOrigin.PROPOSED)], "both kept at once")
    assert row.question.text() == "Kestrel will remember that your daughter is called Ada."
    assert row.undo.isVisible() and not row.remember.isVisible()
    qtbot.mouseClick(row.undo, Qt.MouseButton.LeftButton)
    _until_listed(window, loop, [("I live in Oslo.", MemoryOrigin.PROPOSED)], "undone")
    assert row.question.text() == "Kestrel will remember that you live in Oslo."
    qtbot.mouseClick(row.dismiss, Qt.MouseButton.LeftButton)
    assert not row.isVisible() and _listed(window, loop) == [("I live in Oslo.", MemoryOrigin.PROPOSED)]


def test_settings_memory_page_saves_on_ok_and_opens_the_memory_window(window, loop, monkeypatch) -> None:
    def choose(dialog: SettingsDialog) -> int:
        form = dialog.memory.form
        assert form.value() == MemorySettings(), "the page shows the settings as saved"
        dialog.show_page("memory")
        assert dialog.tabs.currentWidget() is dialog.memory
        form.propose.setCurrentIndex(form.propose.findData(MemoryProposal.AUTOMATIC.value))
        form.api.setChecked(True)
        return QDialog.DialogCode.Accepted

    monkeypatch.setattr(SettingsDialog, "exec", choose)
    window.edit_settings()
    door = window.doors.settings
    run(loop, until(lambda: door.settings.memory.propose is MemoryProposal.AUTOMATIC, what="saved on OK"))
    assert door.settings.memory == MemorySettings(propose=MemoryProposal.AUTOMATIC, api_uses_memory=True)

    dialog = SettingsDialog(door.settings, window, show_memory=window.memory.show_window)
    assert dialog.memory.form.propose.currentData() == "automatic"
    dialog.memory.form.enabled.setChecked(False)
    dialog.show()
    dialog.memory.open_memory.click()
    assert dialog.result() == QDialog.DialogCode.Accepted, "Open Memory… closes Settings as OK does"
    shown = window.memory.window
    assert shown is not None and shown.isVisible()
    assert not dialog.value().memory.enabled
    assert not SettingsDialog(door.settings, window).memory.open_memory.isVisibleTo(window), \
        "no button where nothing can open the Memory window"


@pytest.mark.parametrize(("fact", "asked"), [
    ("My daughter is called Ada.", "Remember that your daughter is called Ada?"),
    ("I was born in Oslo and I am a nurse.", "Remember that you were born in Oslo and you are a nurse?"),
    ("Ada is my daughter!", "Remember that Ada is your daughter?"),
    ("I'm vegetarian.", "Remember that you're vegetarian?"),
    ("The sky is blue.", "Remember “The sky is blue.”?"),
    ("Was it Tom?", "Remember “Was it Tom?”?"),
])
def test_a_fact_is_asked_about_in_the_second_person(fact: str, asked: str) -> None:
    assert proposal_question(fact) == asked
    assert kept_notice(fact).startswith("Kestrel will remember ")
