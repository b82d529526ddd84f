"""The quick-ask window says the problems of its own exchange and those about no chat, not another chat's:
Answering's Problems name the chat they are about."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.service import events as ev
from app.service.doors.quick_ask import QuickAskDoor
from app.ui.quick_ask.quick_window import QuickAskWindow
from tests.helpers.scripted_answers import Script, written
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.vision_controller import checked, png_image
from tests.ui.conftest import run, service_of, until, with_generation


def test_a_problem_of_another_chat_is_not_said_while_its_own_and_global_ones_are(make_window, loop, qtbot) -> None:
    engine = ScriptedEngine()
    engine.scripts.extend([written("First."), Script(token_s=0.5)])  # the second runs until stopped
    window = make_window(engine=engine)
    with_generation(window, loop)  # the main window's open chat is saved: a chat of its own
    other = window.doors.chat.conversation
    assert other is not None
    service = service_of(window)
    quick = QuickAskWindow(QuickAskDoor(service))
    qtbot.addWidget(quick)
    quick.summon()
    QTest.keyClicks(quick.question, "First?")
    QTest.keyClick(quick.question, Qt.Key.Key_Return)
    run(loop, until(lambda: quick.answers.last_answer() == "First." and not quick._door.busy, what="the answer"))
    mine = quick._door.conversation_id
    assert mine is not None and mine != other.id

    # Answering's own Problem about the exchange names it (a follow-up with an image the tiny model cannot see).
    heard: list[ev.Problem] = []
    unsubscribe = service.subscribe(lambda event: heard.append(event) if isinstance(event, ev.Problem) else None)
    try:
        assert not quick._door.ask("What is in it?", [checked(png_image(64, 64), "photo.png")])
    finally:
        unsubscribe()
    assert [problem.conversation_id for problem in heard] == [mine]

    QTest.keyClicks(quick.question, "Go on at length")
    QTest.keyClick(quick.question, Qt.Key.Key_Return)
    run(loop, until(lambda: quick._door.busy and quick.answers.exchange.rowCount() == 4, what="the long answer"))
    service.bus.emit(ev.Problem("The other chat's message could not be saved.", "history", other.id))
    assert quick.status.text() != "The other chat's message could not be saved.", "another chat's: not said here"
    service.bus.emit(ev.Problem("This exchange's trouble.", "history", mine))
    assert quick.status.text() == "This exchange's trouble."
    service.bus.emit(ev.Problem("The engine stopped.", "engine"))
    assert quick.status.text() == "The engine stopped.", "about no chat: said here too"
    quick._door.stop()
    run(loop, until(lambda: not quick._door.busy, what="the answer stopped"))
