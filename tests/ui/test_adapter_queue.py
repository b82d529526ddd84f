"""The adapter over a real service: the chat list's ANSWERING, WAITING and HAS_DRAFT roles
follow the answers and drafts (only the changed rows and roles are told), and the new
signals carry the chat and the kind of problem."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtWidgets import QLabel

from app.service import events as ev
from app.service.doors.window import WindowDoors
from app.ui.state.adapter import ServiceAdapter
from app.ui.state.conversation_model import ConversationRoles as R
from tests.helpers.scripted_answers import Script, written
from tests.service.conftest import SMALL, install, make_service
from tests.ui.conftest import long_answers, run, until

LONG = dataclasses.replace(SMALL, max_tokens=100_000)


@pytest.fixture
def started(loop, tiny_model):
    install(tiny_model, LONG)
    service = make_service(long_answers())  # A must still answer while B waits
    doors = WindowDoors.of(service)
    adapter = ServiceAdapter(doors)
    run(loop, service.start_up())
    yield service, doors, adapter
    run(loop, service.shutdown())
    adapter.close()


def _flags(adapter: ServiceAdapter, conversation_id: int) -> tuple[bool, bool, bool]:
    model = adapter.conversations
    index = model.index(model.row_of(conversation_id))
    return index.data(R.ANSWERING), index.data(R.WAITING), index.data(R.HAS_DRAFT)


def test_the_chat_list_shows_who_is_answered_who_waits_and_who_has_a_draft(loop, started) -> None:
    service, doors, adapter = started
    changed: list[tuple[int, list[int]]] = []
    adapter.conversations.dataChanged.connect(lambda top, bottom, roles: changed.append((top.row(), list(roles))))
    queue_signals: list[tuple[int | None, tuple[int, ...]]] = []
    adapter.answerQueueChanged.connect(lambda: queue_signals.append((doors.chat.answering_id, doors.chat.waiting_ids)))
    activity: list[tuple[str, object]] = []
    adapter.activityChanged.connect(lambda text, chat: activity.append((text, chat)))
    busy: list[bool] = []
    adapter.busyChanged.connect(busy.append)

    # A runs until stopped; B, once it gets the engine, answers in a few words.
    service.session.client.scripts.extend([Script(), written("B's short answer")])
    # A runs until stopped; B, once it gets the engine, answers in a few words.
    service.session.client.scripts.extend([Script(), written("B's short answer")])
    assert doors.chat.send("A, at length")
    run(loop, until(lambda: doors.chat.answering_id is not None and service.answers.writing,
                    what="A to be written"))
    first = doors.chat.answering_id
    assert _flags(adapter, first) == (True, False, False)
    doors.chat.new_conversation()
    assert busy[-1] is False, "the new chat is not busy while A answers"
    assert doors.chat.send("B, meanwhile")
    run(loop, until(lambda: doors.chat.waiting_ids, what="B to wait"))
    second = doors.chat.waiting_ids[0]
    assert busy[-1] is True
    assert _flags(adapter, second) == (False, True, False) and _flags(adapter, first)[0]
    changed.clear()
    doors.chat.save_draft(first, "a thought for A")
    assert _flags(adapter, first) == (True, False, True)
    assert changed == [(adapter.conversations.row_of(first), [R.HAS_DRAFT])], "one row, one role"
    changed.clear()
    doors.chat.stop(first)
    run(loop, doors.chat.wait_idle())
    assert _flags(adapter, first) == (False, False, True) and _flags(adapter, second) == (False, False, False)
    roles = {role for _, rows in changed for role in rows}
    assert roles <= {R.ANSWERING, R.WAITING, R.UPDATED, 0}, roles  # DisplayRole is 0: a chat moved up
    assert (first, (second,)) in queue_signals and queue_signals[-1] == (None, ())
    assert any(chat == second and text == "Writing…" for text, chat in activity)
    assert activity[-1] == ("Idle", None)
    assert busy[-1] is False
    assert adapter.conversations.roleNames()[R.HAS_DRAFT] == b"hasDraft"


def test_problem_signals_carry_their_kind_and_an_engine_problem_is_solved(loop, started) -> None:
    service, doors, adapter = started
    problems: list[tuple[str, str]] = []
    adapter.problem.connect(lambda text, kind: problems.append((text, kind)))
    solved: list[str] = []
    adapter.problemSolved.connect(solved.append)
    assert doors.chat.send("Keep talking")
    grew: list[object] = []
    service.subscribe(lambda event: isinstance(event, ev.TextGrew) and grew.append(event))
    run(loop, until(lambda: len(grew) > 3, what="some text"))
    service.session.client.die()  # the scripted engine's SIGKILL
    run(loop, doors.chat.wait_idle())
    assert problems and problems[-1][1] == "engine" and not solved
    run(loop, doors.chat.set_conversation_settings("", dataclasses.replace(SMALL, max_tokens=4)))
    assert doors.chat.send("Back?")
    run(loop, doors.chat.wait_idle())
    assert solved == ["engine"]


def test_one_argument_slots_still_take_the_two_argument_signals(loop, started, qtbot) -> None:
    """The window connects label.setText and its own one-argument slots; Qt drops the extra."""
    service, doors, adapter = started
    label = QLabel()
    qtbot.addWidget(label)
    adapter.activityChanged.connect(label.setText)
    texts: list[str] = []
    adapter.problem.connect(lambda text: texts.append(text))
    service.bus.emit(ev.ActivityChanged("Thinking…", 7))
    service.bus.emit(ev.Problem("Something to read", "disk"))
    assert label.text() == "Thinking…" and texts == ["Something to read"]
