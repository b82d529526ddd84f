"""Quick ask on the real engine: the tiny model answers in the quick-ask window, through a real EngineClient."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.core.conversation import MessageState, Role
from app.core.store.history import HistoryStore
from app.service.doors.quick_ask import QuickAskDoor
from app.ui.quick_ask.quick_window import QuickAskWindow
from tests.ui.conftest import run, service_of, stored, until


def test_the_tiny_model_answers_in_the_quick_window_and_the_answer_is_saved_in_its_own_chat(
        loop, make_window, qtbot) -> None:
    window = make_window()  # the tiny model, on a real engine process
    quick = QuickAskWindow(QuickAskDoor(service_of(window)))
    qtbot.addWidget(quick)
    quick.summon()
    QTest.keyClicks(quick.question, "Hello there")
    QTest.keyClick(quick.question, Qt.Key.Key_Return)
    run(loop, until(lambda: len(quick.answers.exchange.messages()) == 2 and not quick._door.busy
                    and quick.answers.exchange.messages()[-1].state != MessageState.STREAMING, timeout=120,
                    what="the tiny model's answer"))
    question, answer = quick.answers.exchange.messages()
    assert (question.role, question.text) == (Role.USER, "Hello there") and answer.role == Role.ASSISTANT
    conversation_id = quick._door.conversation_id
    saved = stored(loop, window, HistoryStore.messages, conversation_id)
    assert [m.text for m in saved] == [question.text, answer.text], "the window shows what was saved"
    assert answer.stats is not None and answer.stats.tokens > 0
    assert quick.answers.last_answer() == answer.text
    assert window.doors.chat.conversation is None or window.doors.chat.conversation.id != conversation_id
    assert window.adapter.messages.rowCount() == 0, "the main window's open chat shows none of it"
