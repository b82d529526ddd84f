"""Start-up, empty state, queued sends, conversations, background pause, long chats."""

from __future__ import annotations

import asyncio
import time

from PySide6.QtCore import Qt
from PySide6.QtTest import QAbstractItemModelTester

from app.core.conversation import MessageState, Role
from app.ui.message_model import MessageRoles
from app.ui.model_setup import ModelSetup
from tests.ui.conftest import choose_in_settings, run, until, with_generation


def _send(qtbot, window, text: str) -> None:
    qtbot.keyClicks(window.composer.edit, text)
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)


def test_no_model_and_no_starter_shows_the_empty_state(make_window, loop, monkeypatch) -> None:
    monkeypatch.setattr(ModelSetup, "starter_available", lambda self: False)
    window = make_window(model=None)
    assert window.session.model_state.value == "none"
    assert window.stack.currentWidget() is window.empty
    assert "import a GGUF model file" in window.empty_text.text()
    assert window.import_button.isVisible() and window.model_label.text() == "No model"


def test_importing_a_model_from_the_empty_state(make_window, loop, monkeypatch, tiny_model) -> None:
    monkeypatch.setattr(ModelSetup, "starter_available", lambda self: False)
    window = make_window(model=None)
    run(loop, window.session.import_model(str(tiny_model)))
    assert window.session.model_state.value == "ready"
    assert window.stack.currentWidget() is window.messages
    assert [m.path.name for m in window.session.library.list()] == [tiny_model.name]


def test_sending_while_the_model_loads_queues_the_message(make_window, loop, qtbot) -> None:
    window = make_window(start=False)

    async def scenario():
        starting = window.session.spawn(window.session.start_up())
        await until(lambda: window.session.model_state.value == "loading")
        qtbot.keyClicks(window.composer.edit, "Early bird")
        qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
        assert window.session.queued
        assert window.session.messages.rowCount() == 1
        assert "when the model is ready" in window.activity_label.text()
        await starting
        await until(lambda: not window.session.busy and window.session.messages.rowCount() == 2)

    run(loop, scenario())
    assert window.session.messages.messages()[1].state == MessageState.COMPLETE


def test_new_rename_search_and_delete_conversations(make_window, loop, qtbot, monkeypatch) -> None:
    window = make_window()
    _send(qtbot, window, "Apples are red")
    run(loop, until(lambda: not window.session.busy))
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert window.session.messages.rowCount() == 0 and window.session.conversation_id is None
    _send(qtbot, window, "Bananas are yellow")
    run(loop, until(lambda: not window.session.busy))
    chats = window.conversation_list.model()
    assert [chats.index(r, 0).data() for r in range(chats.rowCount())] == ["Bananas are yellow", "Apples are red"]

    assert chats.setData(chats.index(1, 0), "Fruit talk")
    assert window.session.store.list_conversations()[1].title == "Fruit talk"

    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert window.search.hasFocus()
    qtbot.keyClicks(window.search, "APPLES")  # message text, any case
    assert chats.rowCount() == 1 and chats.index(0, 0).data() == "Fruit talk"
    window.search.clear()
    assert chats.rowCount() == 2

    monkeypatch.setattr(window, "confirm", lambda question: "Fruit talk" in question)
    window.conversation_list.setCurrentIndex(chats.index(1, 0))
    window.delete_current_conversation()
    assert [c.title for c in window.session.store.list_conversations()] == ["Bananas are yellow"]


def test_opening_a_conversation_from_the_list(make_window, loop, qtbot) -> None:
    window = make_window()
    _send(qtbot, window, "First chat")
    run(loop, until(lambda: not window.session.busy))
    window.session.new_conversation()
    _send(qtbot, window, "Second chat")
    run(loop, until(lambda: not window.session.busy))
    chats = window.conversation_list.model()
    older = chats.index(1, 0)
    window.conversation_list.clicked.emit(older)
    assert window.session.messages.messages()[0].text == "First chat"
    assert window.title.text() == "<b>First chat</b>"


def test_item_models_pass_qt_model_tester(make_window, loop, qtbot) -> None:
    window = make_window()
    testers = [QAbstractItemModelTester(window.session.messages, QAbstractItemModelTester.FailureReportingMode.Fatal),
               QAbstractItemModelTester(window.session.conversations, QAbstractItemModelTester.FailureReportingMode.Fatal),
               QAbstractItemModelTester(window.filter, QAbstractItemModelTester.FailureReportingMode.Fatal)]
    _send(qtbot, window, "Model test")
    run(loop, until(lambda: not window.session.busy))
    window.session.regenerate()
    run(loop, until(lambda: not window.session.busy))
    window.session.new_conversation()
    _send(qtbot, window, "Another")
    run(loop, until(lambda: not window.session.busy))
    window.filter.set_query("model")
    window.filter.set_query("")
    assert window.session.messages.rowCount() == 2 and len(testers) == 3


def test_minimizing_pauses_the_engine_and_restoring_resumes(make_window, loop, qtbot) -> None:
    window = make_window()
    with_generation(window, max_tokens=100000)
    _send(qtbot, window, "Go")
    run(loop, until(lambda: len(window.session.messages.messages()[-1].text) > 5))
    window.setWindowState(Qt.WindowState.WindowMinimized)
    run(loop, until(lambda: "Paused" in window.activity_label.text()))
    answer_id = window.session.messages.messages()[-1].id

    async def growth_while_paused() -> int:
        await asyncio.sleep(0.5)  # tokens already in the pipe still arrive: let them
        before = len(window.session.messages.messages()[-1].text)
        await asyncio.sleep(0.8)
        return len(window.session.messages.messages()[-1].text) - before

    assert run(loop, growth_while_paused()) == 0
    window.setWindowState(Qt.WindowState.WindowNoState)
    before = len(window.session.messages.messages()[-1].text)
    run(loop, until(lambda: len(window.session.messages.messages()[-1].text) > before + 10))
    window.session.stop()
    run(loop, until(lambda: not window.session.busy))
    assert window.session.messages.messages()[-1].id == answer_id


def test_long_conversation_leaves_out_old_turns_and_marks_the_boundary(make_window, loop, qtbot) -> None:
    window = make_window()
    with_generation(window, context_length=512, max_tokens=16)
    store, conversation_id = window.session.store, window.session.conversation_id
    for i in range(40):
        store.add_message(conversation_id, Role.USER, f"question {i} " + "the cat sat " * 8)
        store.add_message(conversation_id, Role.ASSISTANT, f"answer {i} " + "a dog ran " * 8)
    window.session.open_conversation(conversation_id)
    _send(qtbot, window, "And now?")
    run(loop, until(lambda: not window.session.busy))
    answer = window.session.messages.messages()[-1]
    assert answer.state == MessageState.COMPLETE
    assert answer.stats["messages_left_out"] > 0
    boundary = window.session.messages.context_starts_at
    assert boundary == answer.stats["messages_left_out"]
    assert window.session.messages.index(boundary - 1).data(MessageRoles.OUT_OF_CONTEXT) is True
    assert window.session.messages.index(boundary).data(MessageRoles.OUT_OF_CONTEXT) is False


def test_a_2000_message_chat_opens_without_laying_out_every_message(make_window, loop, qtbot) -> None:
    window = make_window()
    with_generation(window, max_tokens=16)
    store, conversation_id = window.session.store, window.session.conversation_id
    with store.transaction():
        for i in range(1000):
            store.add_message(conversation_id, Role.USER, f"Question {i}: what about **item {i}**?")
            store.add_message(conversation_id, Role.ASSISTANT,
                              f"Answer {i}\n\n- point one\n- point two\n\n```python\nprint({i})\n```")
    delegate = window.messages.delegate
    started = time.perf_counter()
    window.session.open_conversation(conversation_id)
    qtbot.wait(50)
    opened_in = time.perf_counter() - started
    assert window.session.messages.rowCount() == 2000
    # Only what is on screen was laid out, not 2,000 documents.
    assert delegate.layouts < 60, (delegate.layouts, opened_in)
    bar = window.messages.verticalScrollBar()
    assert bar.value() == bar.maximum() > 0
    bar.setValue(bar.maximum() // 2)
    qtbot.wait(20)
    _send(qtbot, window, "Still smooth?")
    run(loop, until(lambda: not window.session.busy))
    assert window.session.messages.rowCount() == 2002
    assert bar.value() == bar.maximum(), "sending jumps to the end and follows the answer"


def test_first_run_sets_up_the_starter_model_then_answers(make_window, loop, qtbot, starter_model) -> None:
    window = make_window(model=None, start=False)
    progress = []
    window.session.setup.progress.connect(lambda what, done, total: progress.append((what, done, total)))
    starting = window.session.spawn(window.session.start_up())
    run(loop, until(lambda: window.progress.isVisible(), what="the progress bar"))
    assert window.cancel_setup.isVisible()
    run(loop, starting, timeout=300)
    assert window.session.model_state.value == "ready"
    assert "Gemma 3 270M" in window.model_label.text() and window.device_label.text() == "Device: CPU"
    assert progress[0][0] == "Setting up the starter model" and progress[-1][1] == progress[-1][2]
    assert not window.progress.isVisible()
    with_generation(window, max_tokens=12, temperature=0.0)
    _send(qtbot, window, "What is the capital of France?")
    run(loop, until(lambda: not window.session.busy), timeout=300)
    answer = window.session.messages.messages()[-1]
    assert answer.state == MessageState.COMPLETE and answer.text.strip()
    assert answer.stats["tokens"] >= 1 and answer.stats["chat_format"] == "gemma"


def test_cancelling_the_starter_setup_leaves_the_empty_state(make_window, loop, starter_model) -> None:
    window = make_window(model=None, start=False)
    window.session.setup.progress.connect(lambda *_: window.session.setup.cancel())
    run(loop, window.session.start_up(), timeout=300)
    assert window.session.model_state.value == "none"
    assert window.stack.currentWidget() is window.empty
    assert window.session.library.list() == []


def test_switching_to_the_dark_theme_repaints_in_dark(make_window, monkeypatch) -> None:
    from PySide6.QtGui import QGuiApplication, QPalette

    window = make_window()
    choose_in_settings(window, monkeypatch, theme="dark")
    window_color = QGuiApplication.palette().color(QPalette.ColorRole.Window)
    assert window.messages.delegate.dark and window_color.lightness() < 80
    assert window.session.settings_file.load().theme == "dark"
    choose_in_settings(window, monkeypatch, theme="light")
    assert not window.messages.delegate.dark
    assert QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness() > 200


def test_a_context_longer_than_the_model_knows_loads_once_not_every_answer(make_window, loop, qtbot) -> None:
    window = make_window()
    with_generation(window, context_length=8192)  # the tiny model was trained on 2048
    _send(qtbot, window, "One")
    run(loop, until(lambda: not window.session.busy))
    loaded = window.session.client.loaded
    assert loaded.context_length == 2048
    _send(qtbot, window, "Two")
    run(loop, until(lambda: not window.session.busy))
    assert window.session.client.loaded is loaded, "the model was reloaded for nothing"
    assert window.session.messages.messages()[-1].stats["prompt_tokens_evaluated"] < \
        window.session.messages.messages()[-1].stats["prompt_tokens"]
