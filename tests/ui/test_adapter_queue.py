"""The adapter over a real controller: the chat list's ANSWERING, WAITING and HAS_DRAFT roles
follow the answers and drafts (only the changed rows and roles are told), and the new
signals carry the chat and the kind of problem."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtWidgets import QLabel

from app.service import events as ev
from app.ui.state.adapter import ControllerAdapter
from app.ui.state.conversation_model import ConversationRoles as R
from tests.helpers.scripted_answers import Script, written
from tests.service.conftest import SMALL, install, make_controller
from tests.ui.conftest import long_answers, run, until

LONG = dataclasses.replace(SMALL, max_tokens=100_000)


@pytest.fixture
def started(loop, tiny_model):
    install(tiny_model, LONG)
    controller = make_controller(long_answers())  # A must still answer while B waits
    adapter = ControllerAdapter(controller)
    run(loop, controller.start_up())
    yield controller, adapter
    run(loop, controller.shutdown())
    adapter.close()


def _flags(adapter: ControllerAdapter, conversation_id: int) -> tuple[bool, bool, bool]:
    model = adapter.conversations
    index = model.index(model.row_of(conversation_id))
    return index.data(R.ANSWERING), index.data(R.WAITING), index.data(R.HAS_DRAFT)


def test_the_chat_list_shows_who_is_answered_who_waits_and_who_has_a_draft(loop, started) -> None:
    controller, adapter = started
    changed: list[tuple[int, list[int]]] = []
    adapter.conversations.dataChanged.connect(lambda top, bottom, roles: changed.append((top.row(), list(roles))))
    queue_signals: list[tuple[int | None, tuple[int, ...]]] = []
    adapter.answerQueueChanged.connect(lambda: queue_signals.append((controller.answering_id, controller.waiting_ids)))
    activity: list[tuple[str, object]] = []
    adapter.activityChanged.connect(lambda text, chat: activity.append((text, chat)))
    busy: list[bool] = []
    adapter.busyChanged.connect(busy.append)

    # A runs until stopped; B, once it gets the engine, answers in a few words.
    controller.session.client.scripts.extend([Script(), written("B's short answer")])
    # A runs until stopped; B, once it gets the engine, answers in a few words.
    controller.session.client.scripts.extend([Script(), written("B's short answer")])
    assert controller.send("A, at length")
    run(loop, until(lambda: controller.answering_id is not None and controller.answers.writing,
                    what="A to be written"))
    first = controller.answering_id
    assert _flags(adapter, first) == (True, False, False)
    controller.new_conversation()
    assert busy[-1] is False, "the new chat is not busy while A answers"
    assert controller.send("B, meanwhile")
    run(loop, until(lambda: controller.waiting_ids, what="B to wait"))
    second = controller.waiting_ids[0]
    assert busy[-1] is True
    assert _flags(adapter, second) == (False, True, False) and _flags(adapter, first)[0]
    changed.clear()
    controller.save_draft(first, "a thought for A")
    assert _flags(adapter, first) == (True, False, True)
    assert changed == [(adapter.conversations.row_of(first), [R.HAS_DRAFT])], "one row, one role"
    changed.clear()
    controller.stop(first)
    run(loop, controller.wait_idle())
    assert _flags(adapter, first) == (False, False, True) and _flags(adapter, second) == (False, False, False)
    roles = {role for _, rows in changed for role in rows}
    assert roles <= {R.ANSWERING, R.WAITING, R.UPDATED, 0}, roles  # DisplayRole is 0: a chat moved up
    assert (first, (second,)) in queue_signals and queue_signals[-1] == (None, ())
    assert any(chat == second and text == "Writing…" for text, chat in activity)
    assert activity[-1] == ("Idle", None)
    assert busy[-1] is False
    assert adapter.conversations.roleNames()[R.HAS_DRAFT] == b"hasDraft"


def test_problem_signals_carry_their_kind_and_an_engine_problem_is_solved(loop, started) -> None:
    controller, adapter = started
    problems: list[tuple[str, str]] = []
    adapter.problem.connect(lambda text, kind: problems.append((text, kind)))
    solved: list[str] = []
    adapter.problemSolved.connect(solved.append)
    assert controller.send("Keep talking")
    grew: list[object] = []
    controller.subscribe(lambda event: isinstance(event, ev.TextGrew) and grew.append(event))
    run(loop, until(lambda: len(grew) > 3, what="some text"))
    controller.session.client.die()  # the scripted engine's SIGKILL
    run(loop, controller.wait_idle())
    assert problems and problems[-1][1] == "engine" and not solved
    run(loop, controller.set_conversation_settings("", dataclasses.replace(SMALL, max_tokens=4)))
    assert controller.send("Back?")
    run(loop, controller.wait_idle())
    assert solved == ["engine"]


def test_one_argument_slots_still_take_the_two_argument_signals(loop, started, qtbot) -> None:
    """The window connects label.setText and its own one-argument slots; Qt drops the extra."""
    controller, adapter = started
    label = QLabel()
    qtbot.addWidget(label)
    adapter.activityChanged.connect(label.setText)
    texts: list[str] = []
    adapter.problem.connect(lambda text: texts.append(text))
    controller.bus.emit(ev.ActivityChanged("Thinking…", 7))
    controller.bus.emit(ev.Problem("Something to read", "disk"))
    assert label.text() == "Thinking…" and texts == ["Something to read"]
