"""The quick-ask window offscreen, over the real window's service on the scripted engine: asking, following up,
chips, Copy, Continue in Kestrel, and an exchange not kept."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtTest import QTest

from app.core.generation import GenerationSettings
from app.engine import protocol as p
from app.service.events import ModelState
from app.service.doors.quick_ask import QuickAskDoor
from app.ui.messages.message_view import MessageView
from app.ui.quick_ask.quick_answer import TALLEST
from app.ui.quick_ask.quick_chips import COPIED_KEPT, CopiedTextChip
from app.ui.quick_ask.quick_window import NO_MODEL, TITLE, QuickAskWindow
from tests.helpers.scripted_answers import written
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import run, service_of, until


def asked(engine: ScriptedEngine) -> list[p.Generate]:
    return [request for request in engine.requests if isinstance(request, p.Generate)]


@pytest.fixture
def quick_over(make_window, qtbot):
    """A started main window on a scripted engine with these answers, and a quick-ask window over its service."""

    def make(*answers: str, engine: ScriptedEngine | None = None, **window_args):
        engine = engine or ScriptedEngine()
        engine.scripts.extend(written(answer) for answer in answers)
        window = make_window(engine=engine, **window_args)
        door = QuickAskDoor(service_of(window))
        quick = QuickAskWindow(door)
        qtbot.addWidget(quick)
        return window, quick, engine

    return make


def ask(loop, quick: QuickAskWindow, question: str, answers: int) -> None:
    """Type a question, press Enter, and wait until the exchange holds that many answers, finished."""
    QTest.keyClicks(quick.question, question)
    QTest.keyClick(quick.question, Qt.Key.Key_Return)
    run(loop, until(lambda: len([m for m in quick.answers.exchange.messages() if m.role.value == "assistant"
                                 and m.state.value != "streaming"]) == answers and not quick._door.busy,
                    what=f"answer {answers}"))


def test_summon_shows_a_small_tool_window_focused_on_its_question(quick_over, qtbot) -> None:
    _window, quick, _engine = quick_over()
    quick.summon()
    assert quick.windowTitle() == TITLE == "Kestrel — Quick ask"
    flags = quick.windowFlags()
    for flag in (Qt.WindowType.Tool, Qt.WindowType.FramelessWindowHint, Qt.WindowType.WindowStaysOnTopHint):
        assert flags & flag == flag, flag
    assert quick.isVisible() and quick.width() == 640
    qtbot.waitUntil(lambda: quick.question.hasFocus())
    # Summoned again after the focus went elsewhere in it (a button pressed), the question has it back.
    quick.screenshot.setFocus()
    qtbot.waitUntil(lambda: quick.screenshot.hasFocus())
    quick.hide()
    quick.summon()
    # The window's focus widget: what has the keys once the desktop makes it active (offscreen
    # does not activate a window shown again, so hasFocus() cannot be asked here).
    assert quick.focusWidget() is quick.question
    screen = QGuiApplication.screenAt(quick.geometry().center()) or QGuiApplication.primaryScreen()
    area = screen.availableGeometry()
    assert abs(quick.geometry().center().x() - area.center().x()) <= 1, "centred"
    assert area.top() < quick.y() < area.top() + area.height() // 3, "near the top"


def test_enter_asks_and_the_answer_streams_in_the_window_while_the_open_chat_stays_as_it_was(
        loop, quick_over, qtbot) -> None:
    window, quick, engine = quick_over("**Kestrels** hover over fields.", "They eat voles.")
    chat = window.doors.chat
    open_before = chat.conversation
    quick.summon()
    QTest.keyClicks(quick.question, "What do kestrels do?")
    QTest.keyClick(quick.question, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert quick.question.toPlainText() == "What do kestrels do?\n", "Shift+Enter is a new line"
    QTest.keyClicks(quick.question, "Briefly.")
    QTest.keyClick(quick.question, Qt.Key.Key_Return)
    run(loop, until(lambda: quick.ask_button.text() == "Stop" or quick.answers.last_answer(), what="asking"))
    run(loop, until(lambda: quick.answers.last_answer() == "**Kestrels** hover over fields." and not quick._door.busy,
                    what="the answer"))
    assert isinstance(quick.answers, MessageView), "drawn by the chat pane's own message list"
    assert [m.text for m in quick.answers.exchange.messages()] == ["What do kestrels do?\nBriefly.",
                                                                  "**Kestrels** hover over fields."]
    assert quick.question.toPlainText() == "" and quick.answers.height() > 0
    first = quick._door.conversation_id
    # The follow-up continues the same chat, with the first exchange as its history.
    ask(loop, quick, "What do they eat?", answers=2)
    assert quick._door.conversation_id == first
    assert [m.content for m in asked(engine)[-1].messages][-3:] == [
        "What do kestrels do?\nBriefly.", "**Kestrels** hover over fields.", "What do they eat?"]
    # The main window still shows the chat it showed, with nothing added.
    assert chat.conversation == open_before and window.adapter.messages.rowCount() == 0
    # Esc hides it, and stops nothing.
    QTest.keyClick(quick.question, Qt.Key.Key_Escape)
    assert not quick.isVisible()


def copied_chip(qtbot, quick: QuickAskWindow) -> CopiedTextChip:
    """The copied-text chip, offered just after the window shows (the clipboard is read once it is there)."""
    qtbot.waitUntil(lambda: any(isinstance(c, CopiedTextChip) for c in quick._chips()), timeout=2000)
    [chip] = [c for c in quick._chips() if isinstance(c, CopiedTextChip)]
    return chip


def test_the_copied_text_goes_with_the_question_and_can_be_taken_away(loop, quick_over, qtbot) -> None:
    _window, quick, engine = quick_over("About the fox.", "Without it.")
    QGuiApplication.clipboard().setText("  The quick brown fox jumps over the lazy dog.  ")
    quick.summon()
    assert quick.isVisible() and not quick._chips(), "shown first; the clipboard is read after"
    chip = copied_chip(qtbot, quick)
    assert "Ask about the copied text" in chip.label.text() and "The quick brown fox" in chip.label.text()
    ask(loop, quick, "What is this?", answers=1)
    sent = asked(engine)[-1].messages[-1].content
    assert sent.startswith("What is this?") and "The quick brown fox jumps over the lazy dog." in sent
    assert quick._chips() == [], "the chip went with the question"
    # Another copied text is offered on the next summon; × takes it away and it is not sent.
    QGuiApplication.clipboard().setText("A secret note")
    quick.summon()
    chip = copied_chip(qtbot, quick)
    chip.remove_button.click()
    assert quick._chips() == []
    ask(loop, quick, "Hello", answers=2)
    assert "secret" not in asked(engine)[-1].messages[-1].content


def test_long_copied_text_is_cut_and_the_chip_says_how_much_goes(loop, quick_over, qtbot) -> None:
    _window, quick, engine = quick_over("Long.")
    QGuiApplication.clipboard().setText("word " * 4000)  # 19,999 characters once trimmed
    quick.summon()
    chip = copied_chip(qtbot, quick)
    assert f"first {COPIED_KEPT:,} of 19,999 characters" in chip.label.text()
    ask(loop, quick, "", answers=1)  # the chip alone asks about it
    sent = asked(engine)[-1].messages[-1].content
    assert sent.startswith("Explain the copied text.") and f"the first {COPIED_KEPT:,} of 19,999" in sent
    assert len(sent) < COPIED_KEPT + 200


def test_copy_puts_the_answer_on_the_clipboard(loop, quick_over) -> None:
    _window, quick, _engine = quick_over("Copy *me*.")
    quick.summon()
    ask(loop, quick, "Say something", answers=1)
    assert quick.copy_button.isVisible() and quick.copy_button.isEnabled()
    QGuiApplication.clipboard().setText("before")
    quick.copy_button.click()
    assert QGuiApplication.clipboard().text() == "Copy *me*."


def test_continue_in_kestrel_hands_the_exchange_over(loop, quick_over, qtbot) -> None:
    window, quick, _engine = quick_over("Go on there.")
    settings = window.doors.settings.settings
    run(loop, window.doors.settings.update_settings(dataclasses.replace(
        settings, quick_ask=dataclasses.replace(settings.quick_ask, save_chats=False))))
    quick.summon()
    ask(loop, quick, "Start here", answers=1)
    conversation_id = quick._door.conversation_id
    with qtbot.waitSignal(quick.continueRequested, timeout=2000) as continued:
        quick.continue_button.click()
    assert continued.args == [conversation_id]
    assert not quick.isVisible() and quick._door.conversation_id is None
    quick.new_exchange()  # nothing of the handed-over chat is ended by starting over
    run(loop, until(lambda: True))
    kept = run(loop, window.doors.files.read_all())
    assert conversation_id in [c.id for c in kept], "kept although quick-ask chats are not"


def test_with_chats_not_kept_new_takes_the_exchange_out_of_the_history(loop, quick_over) -> None:
    window, quick, _engine = quick_over("Forget me.", "Fresh.")
    settings = window.doors.settings.settings
    run(loop, window.doors.settings.update_settings(dataclasses.replace(
        settings, quick_ask=dataclasses.replace(settings.quick_ask, save_chats=False))))
    quick.summon()
    ask(loop, quick, "Private question", answers=1)
    gone = quick._door.conversation_id
    assert gone in [c.id for c in run(loop, window.doors.files.read_all())]
    quick.new_button.click()
    assert quick.answers.exchange.rowCount() == 0
    run(loop, until(lambda: window.adapter.conversations.rowCount() == 0, what="the chat removed"))
    assert gone not in [c.id for c in run(loop, window.doors.files.read_all())]
    ask(loop, quick, "Next", answers=1)
    assert quick._door.conversation_id not in (None, gone)


def test_while_no_model_is_ready_it_says_so_in_the_main_windows_words(loop, quick_over) -> None:
    """The model's state as the status line has it (set here on the session: which model loads is other tests')."""
    window, quick, _engine = quick_over()
    session = service_of(window).session
    session.set_state(ModelState.LOADING, "Loading Tiny…")
    quick.summon()
    assert quick.status.text() == "Loading Tiny…" and quick.status.isVisible()
    session.set_state(ModelState.NONE, "No model yet.")
    assert quick.status.text() == NO_MODEL
    QTest.keyClicks(quick.question, "Anyone there?")
    QTest.keyClick(quick.question, Qt.Key.Key_Return)
    assert quick.question.toPlainText() == "Anyone there?", "kept for when a model is chosen"
    assert quick._door.conversation_id is None and not quick._door.busy
    session.set_state(ModelState.READY, "Tiny")
    assert quick.status.text() == "" and not quick.status.isVisible()


def test_the_window_grows_with_the_answer_up_to_a_bound_then_it_scrolls(loop, quick_over) -> None:
    long_answer = "\n\n".join(f"Paragraph {n} about kestrels hovering." for n in range(40))
    _window, quick, _engine = quick_over(long_answer, generation=GenerationSettings(
        max_tokens=2000, temperature=0.0, context_length=4096))
    quick.summon()
    empty_height = quick.height()
    ask(loop, quick, "Tell me at length", answers=1)
    assert quick.answers.height() == TALLEST and quick.height() > empty_height
    bar = quick.answers.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == bar.maximum(), "it scrolls, following the end"
    assert quick.height() <= quick.screen().availableGeometry().height(), "never taller than the screen"


def test_the_engine_is_awake_while_the_quick_window_shows_with_the_main_window_hidden(loop, quick_over) -> None:
    # Hidden windows pause the engine (the default "when hidden: pause"); the quick-ask window, shown over
    # another program with Kestrel's own window away, must not ask a paused engine.
    window, quick, _engine = quick_over()
    client = service_of(window).session.client
    window.hide()
    assert client.paused
    quick.summon()
    assert not client.paused, "summoned: the engine runs before the question is asked"
    quick.hide()
    assert client.paused, "Esc: hidden like the main window, the engine steps aside again"


def test_the_messages_offer_copy_alone_while_the_chat_pane_offers_all(loop, quick_over, qtbot) -> None:
    window, quick, _engine = quick_over("First.", "Second.")
    quick.summon()
    ask(loop, quick, "One?", answers=1)
    ask(loop, quick, "Two?", answers=2)
    answers, model = quick.answers, quick.answers.exchange
    offered = [[name for name, _rect in answers.delegate.action_rects(model.index(row, 0))]
               for row in range(model.rowCount())]
    assert offered == [["copy"]] * 4, "no Regenerate on the last answer, no Edit on the questions"
    assert "F2" not in model.index(2, 0).data(Qt.ItemDataRole.AccessibleDescriptionRole)
    assert "Ctrl+R" not in model.index(3, 0).data(Qt.ItemDataRole.AccessibleDescriptionRole)
    answers.setFocus()
    answers.setCurrentIndex(model.index(2, 0))
    with qtbot.assertNotEmitted(answers.editRequested):
        QTest.keyClick(answers, Qt.Key.Key_F2)
    QGuiApplication.clipboard().setText("before")
    answers.run_action(model.index(3, 0), "copy")
    assert QGuiApplication.clipboard().text() == "Second."
    assert window.messages.delegate.offered == {"copy", "regenerate", "edit", "remember"}, "the chat pane's are as they were"


def test_code_blocks_in_the_quick_window_follow_the_view_menus_wrap_choice(loop, quick_over) -> None:
    window, quick, _engine = quick_over()
    assert quick.answers.delegate.wrap_code == window.doors.settings.settings.wrap_code
    settings = window.doors.settings.settings
    run(loop, window.doors.settings.update_settings(dataclasses.replace(settings, wrap_code=not settings.wrap_code)))
    run(loop, until(lambda: quick.answers.delegate.wrap_code == (not settings.wrap_code), what="the choice followed"))
