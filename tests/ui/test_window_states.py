"""Start-up, empty state, queued sends, conversations, background pause, long chats."""

from __future__ import annotations

import asyncio
import time

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QAbstractItemModelTester

from app.core.conversation import MessageState, Role
from app.ui.state.message_model import MessageRoles
from app.core.store.history import HistoryStore
from tests.ui.conftest import choose_in_settings, idle, long_answers, run, service_of, stored, until, with_generation


def _send(qtbot, window, text: str) -> None:
    qtbot.keyClicks(window.composer.edit, text)
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)


def test_no_model_and_no_starter_shows_the_empty_state(make_window, loop) -> None:
    window = make_window(model=None)  # no starter either (make_window)
    assert window.doors.model.model_state.value == "none"
    assert window.stack.currentWidget() is window.empty
    assert "import a GGUF model file" in window.empty_text.text()
    assert window.import_button.isVisible() and window.model_label.text() == "No model"


def test_importing_a_model_from_the_empty_state(make_window, loop, tiny_model) -> None:
    window = make_window(model=None)  # no starter either (make_window)
    run(loop, service_of(window).library.add(str(tiny_model), reference=False, load=True))
    assert window.doors.model.model_state.value == "ready"
    assert window.stack.currentWidget() is window.messages
    assert [m.path.name for m in service_of(window).session.setup.library.list()] == [tiny_model.name]


def test_sending_while_the_model_loads_queues_the_message(make_window, loop, qtbot) -> None:
    window = make_window(start=False)

    async def scenario():
        starting = service_of(window).spawn(service_of(window).start_up())
        await until(lambda: window.doors.model.model_state.value == "loading")
        qtbot.keyClicks(window.composer.edit, "Early bird")
        qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
        await until(lambda: window.doors.chat.open_chat_busy and window.adapter.messages.rowCount() == 1,
                    what="the message to be saved and wait")
        # Said once the answer's turn finds the model still loading (a moment after the message is
        # saved: on a busy machine the label could still be read before it).
        await until(lambda: "when the model is ready" in window.activity_label.text(),
                    what="the status line to say the message waits for the model")
        assert window.composer.edit.toPlainText() == ""
        await starting
        await until(lambda: idle(window)() and window.adapter.messages.rowCount() == 2
                    and window.adapter.messages.messages()[1].state == MessageState.COMPLETE)

    run(loop, scenario())
    assert window.adapter.messages.messages()[1].state == MessageState.COMPLETE


def test_new_rename_search_and_delete_conversations(make_window, loop, qtbot, monkeypatch) -> None:
    window = make_window()
    _send(qtbot, window, "Apples are red")
    run(loop, until(idle(window)))
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert window.adapter.messages.rowCount() == 0 and window.doors.chat.conversation is None
    _send(qtbot, window, "Bananas are yellow")
    run(loop, until(idle(window)))
    chats = window.conversation_list.model()
    assert [chats.index(r, 0).data() for r in range(chats.rowCount())] == ["Bananas are yellow", "Apples are red"]

    assert chats.setData(chats.index(1, 0), "Fruit talk")
    assert chats.index(1, 0).data() == "Fruit talk"  # shown at once, saved off the UI thread

    async def saved_titles() -> list[str]:
        while True:
            titles = [c.title for c in await service_of(window).storage.history(HistoryStore.list_conversations)]
            if "Fruit talk" in titles:
                return titles
            await asyncio.sleep(0.01)

    assert run(loop, saved_titles()) == ["Bananas are yellow", "Fruit talk"]

    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert window.search.hasFocus()
    qtbot.keyClicks(window.search, "APPLES")  # message text, any case
    assert chats.rowCount() == 2, "debounced: no search while typing"
    run(loop, until(lambda: chats.rowCount() == 1, what="the search"))
    assert chats.index(0, 0).data() == "Fruit talk"
    window.search.clear()
    run(loop, until(lambda: chats.rowCount() == 2, what="the search to clear"))

    monkeypatch.setattr(window, "confirm", lambda question: "Fruit talk" in question)
    window.conversation_list.setCurrentIndex(chats.index(1, 0))
    window.sidebar.delete_current()
    run(loop, until(lambda: chats.rowCount() == 1))
    assert [c.title for c in stored(loop, window, HistoryStore.list_conversations)] == ["Bananas are yellow"]


def test_opening_a_conversation_from_the_list(make_window, loop, qtbot) -> None:
    window = make_window()
    _send(qtbot, window, "First chat")
    run(loop, until(idle(window)))
    window.doors.chat.new_conversation()
    _send(qtbot, window, "Second chat")
    run(loop, until(idle(window)))
    chats = window.conversation_list.model()
    older = chats.index(1, 0)
    window.conversation_list.clicked.emit(older)
    run(loop, until(lambda: window.adapter.messages.messages()[0].text == "First chat"))
    assert window.header.title.full_text() == "First chat"


def test_item_models_pass_qt_model_tester(make_window, loop, qtbot) -> None:
    window = make_window()
    testers = [QAbstractItemModelTester(window.adapter.messages, QAbstractItemModelTester.FailureReportingMode.Fatal),
               QAbstractItemModelTester(window.adapter.conversations, QAbstractItemModelTester.FailureReportingMode.Fatal),
               QAbstractItemModelTester(window.filter, QAbstractItemModelTester.FailureReportingMode.Fatal)]
    _send(qtbot, window, "Model test")
    run(loop, until(idle(window)))
    window.doors.chat.regenerate()
    run(loop, until(idle(window)))
    window.doors.chat.new_conversation()
    _send(qtbot, window, "Another")
    run(loop, until(idle(window)))
    window.search.setText("model")
    window.run_search()
    run(loop, until(lambda: window.filter.rowCount() == 1))
    window.search.setText("")
    window.run_search()
    run(loop, until(lambda: window.filter.rowCount() == 2))
    assert window.adapter.messages.rowCount() == 2 and len(testers) == 3


def test_minimizing_pauses_the_engine_and_restoring_resumes(make_window, loop, qtbot) -> None:
    window = make_window(engine=long_answers())
    with_generation(window, max_tokens=100000)
    _send(qtbot, window, "Go")
    run(loop, until(lambda: window.adapter.messages.rowCount() == 2
                    and len(window.adapter.messages.messages()[-1].text) > 5))
    window.setWindowState(Qt.WindowState.WindowMinimized)
    run(loop, until(lambda: "Paused" in window.activity_label.text()))
    answer_id = window.adapter.messages.messages()[-1].id

    async def growth_while_paused() -> int:
        await asyncio.sleep(0.5)  # tokens already in the pipe still arrive: let them
        before = len(window.adapter.messages.messages()[-1].text)
        await asyncio.sleep(0.8)
        return len(window.adapter.messages.messages()[-1].text) - before

    assert run(loop, growth_while_paused()) == 0
    window.setWindowState(Qt.WindowState.WindowNoState)
    before = len(window.adapter.messages.messages()[-1].text)
    run(loop, until(lambda: len(window.adapter.messages.messages()[-1].text) > before + 10))
    window.doors.chat.stop()
    run(loop, until(idle(window)))
    assert window.adapter.messages.messages()[-1].id == answer_id


def test_long_conversation_leaves_out_old_turns_and_marks_the_boundary(make_window, loop, qtbot) -> None:
    window = make_window()
    with_generation(window, context_length=512, max_tokens=16)
    conversation_id = window.doors.chat.conversation.id

    def fill(store: HistoryStore) -> None:
        for i in range(40):
            store.add_message(conversation_id, Role.USER, f"question {i} " + "the cat sat " * 8)
            store.add_message(conversation_id, Role.ASSISTANT, f"answer {i} " + "a dog ran " * 8)

    stored(loop, window, fill)
    run(loop, window.doors.chat.open_conversation(conversation_id))
    _send(qtbot, window, "And now?")
    run(loop, until(idle(window)))
    answer = window.adapter.messages.messages()[-1]
    assert answer.state == MessageState.COMPLETE
    assert answer.stats.messages_left_out > 0
    model = window.adapter.messages
    # 82 messages, all shown: the first row the model saw is the one after those left out.
    assert model.rowCount() == len(model.messages()) == 82
    boundary = answer.stats.messages_left_out
    assert [row for row in range(model.rowCount()) if model.starts_context(row)] == [boundary]
    assert model.index(boundary - 1).data(MessageRoles.OUT_OF_CONTEXT) is True
    assert model.index(boundary).data(MessageRoles.OUT_OF_CONTEXT) is False


def test_a_2000_message_chat_opens_without_laying_out_every_message(make_window, loop, qtbot) -> None:
    window = make_window()
    with_generation(window, max_tokens=16)
    conversation_id = window.doors.chat.conversation.id

    def fill(store: HistoryStore) -> None:
        with store.transaction():
            for i in range(1000):
                store.add_message(conversation_id, Role.USER, f"Question {i}: what about **item {i}**?")
                store.add_message(conversation_id, Role.ASSISTANT,
                                  f"Answer {i}\n\n- point one\n- point two\n\n```python\nprint({i})\n```")

    stored(loop, window, fill)
    delegate = window.messages.delegate
    run(loop, window.doors.chat.open_conversation(conversation_id))
    started = time.perf_counter()
    qtbot.wait(50)
    opened_in = time.perf_counter() - started
    assert len(window.adapter.messages.messages()) == 2000
    # Only what is on screen was laid out, not 2,000 documents.
    assert delegate.layouts < 60, (delegate.layouts, opened_in)
    bar = window.messages.verticalScrollBar()
    assert bar.value() == bar.maximum() > 0
    bar.setValue(bar.maximum() // 2)
    qtbot.wait(20)
    _send(qtbot, window, "Still smooth?")
    run(loop, until(idle(window)))
    assert len(window.adapter.messages.messages()) == 2002
    assert bar.value() == bar.maximum(), "sending jumps to the end and follows the answer"


@pytest.mark.instruct
def test_first_run_sets_up_the_starter_model_then_answers(make_window, loop, qtbot, starter_model) -> None:
    window = make_window(model=None, start=False, starter=True)
    progress = []
    window.adapter.setupProgress.connect(lambda what, done, total: progress.append((what, done, total)))
    starting = service_of(window).spawn(service_of(window).start_up())
    run(loop, until(lambda: window.progress.isVisible(), what="the progress bar"))
    assert window.cancel_setup.isVisible()
    run(loop, starting, timeout=300)
    assert window.doors.model.model_state.value == "ready"
    assert "Qwen2.5 Coder 1.5B Instruct" in window.model_label.text() and window.device_label.text() == "CPU"
    assert progress[0][0] == "Setting up the starter model" and progress[-1][1] == progress[-1][2]
    assert not window.progress.isVisible()
    with_generation(window, max_tokens=12, temperature=0.0)
    _send(qtbot, window, "What is the capital of France?")
    run(loop, until(idle(window)), timeout=300)
    answer = window.adapter.messages.messages()[-1]
    assert answer.state == MessageState.COMPLETE and "Paris" in answer.text
    assert answer.stats.tokens >= 1 and answer.stats.chat_format == "embedded"


def test_cancelling_the_starter_setup_leaves_the_empty_state(make_window, loop, starter_model) -> None:
    window = make_window(model=None, start=False, starter=True)
    window.adapter.setupProgress.connect(lambda *_: service_of(window).session.setup.cancel())
    run(loop, service_of(window).start_up(), timeout=300)
    assert window.doors.model.model_state.value == "none"
    assert window.stack.currentWidget() is window.empty
    assert service_of(window).session.setup.library.list() == []


def test_switching_to_the_dark_theme_repaints_in_dark(make_window, loop, monkeypatch) -> None:
    from PySide6.QtGui import QGuiApplication, QPalette

    window = make_window()
    choose_in_settings(window, monkeypatch, theme="dark")
    run(loop, until(lambda: window.messages.delegate.dark, what="the dark theme"))
    window_color = QGuiApplication.palette().color(QPalette.ColorRole.Window)
    assert window.messages.delegate.dark and window_color.lightness() < 80
    run(loop, until(lambda: '"dark"' in service_of(window)._settings_path.read_text()))
    choose_in_settings(window, monkeypatch, theme="light")
    run(loop, until(lambda: not window.messages.delegate.dark, what="the light theme"))
    assert QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness() > 200


def test_the_window_state_the_policy_sees() -> None:
    from app.service.models.background import WindowState
    from app.ui.main_window import window_state

    active, inactive = Qt.ApplicationState.ApplicationActive, Qt.ApplicationState.ApplicationInactive
    assert window_state(True, False, active) == WindowState.FOREGROUND
    assert window_state(True, False, inactive) == WindowState.BACKGROUND
    assert window_state(True, True, active) == WindowState.HIDDEN  # minimized
    assert window_state(False, False, inactive) == WindowState.HIDDEN  # hidden to the tray
    assert window_state(True, False, Qt.ApplicationState.ApplicationSuspended) == WindowState.HIDDEN


def test_the_settings_choose_what_the_background_does(make_window, loop, monkeypatch) -> None:
    from app.ui.settings.dialogs import SettingsDialog

    window = make_window()

    def accept(dialog: SettingsDialog) -> int:
        dialog.when_hidden.setCurrentIndex(dialog.when_hidden.findData("gently"))
        dialog.when_in_background.setCurrentIndex(dialog.when_in_background.findData("gently"))
        return 1

    monkeypatch.setattr(SettingsDialog, "exec", accept)
    window.edit_settings()
    run(loop, until(lambda: window.doors.settings.settings.when_hidden == "gently", what="the saved settings"))
    window.showMinimized()
    run(loop, until(lambda: window.activity_label.text() == "Running gently in the background",
                    what="the gentle status"))
    assert service_of(window).session.pace.pace.value == "gently"


def test_the_settings_set_when_an_idle_model_is_unloaded(make_window, loop, monkeypatch) -> None:
    from app.ui.settings.dialogs import SettingsDialog

    window = make_window()
    assert window.doors.settings.settings.unload_after_minutes == 15.0

    def accept(dialog: SettingsDialog) -> int:
        assert dialog.unload_after.value() == 15 and not dialog.exit_engine.isChecked()
        dialog.unload_after.setValue(0)  # shown as "never"
        dialog.exit_engine.setChecked(True)
        return 1

    monkeypatch.setattr(SettingsDialog, "exec", accept)
    window.edit_settings()
    run(loop, until(lambda: window.doors.settings.settings.exit_engine_when_idle, what="the saved settings"))
    assert window.doors.settings.settings.unload_after_minutes is None


def test_a_paused_answer_uses_no_cpu_and_ends_as_an_uninterrupted_one(make_window, loop, qtbot) -> None:
    import psutil

    window = make_window()
    with_generation(window, max_tokens=1500, temperature=0.8, seed=7, context_length=4096)
    _send(qtbot, window, "Tell me a long story")
    run(loop, until(lambda: len(window.adapter.messages.messages()) == 2
                    and len(window.adapter.messages.messages()[-1].text) > 20))
    window.setWindowState(Qt.WindowState.WindowMinimized)
    run(loop, until(lambda: "Paused" in window.activity_label.text()))
    engine = psutil.Process(service_of(window).session.client.pid)

    async def while_paused() -> tuple[int, float]:
        await asyncio.sleep(0.5)  # tokens already in the pipe still arrive, and llama.cpp's threads settle
        text, cpu = len(window.adapter.messages.messages()[-1].text), sum(engine.cpu_times()[:2])
        await asyncio.sleep(1.0)
        return len(window.adapter.messages.messages()[-1].text) - text, sum(engine.cpu_times()[:2]) - cpu

    grew, cpu = run(loop, while_paused())
    assert grew == 0 and cpu < 0.05, (grew, cpu)
    assert window.adapter.messages.messages()[-1].state == MessageState.STREAMING, "paused mid-answer"
    window.setWindowState(Qt.WindowState.WindowNoState)
    run(loop, until(idle(window), timeout=120))
    paused_answer = window.adapter.messages.messages()[-1]

    window.doors.chat.new_conversation()  # the same question, same seed, never paused
    with_generation(window, max_tokens=1500, temperature=0.8, seed=7, context_length=4096)
    _send(qtbot, window, "Tell me a long story")
    run(loop, until(lambda: idle(window)() and len(window.adapter.messages.messages()) == 2), timeout=120)
    straight = window.adapter.messages.messages()[-1]
    assert paused_answer.state == straight.state == MessageState.COMPLETE
    assert paused_answer.text == straight.text and len(straight.text) > 200


def test_stop_and_close_work_while_paused_and_the_answer_says_it_waits(make_window, loop, qtbot) -> None:
    window = make_window(engine=long_answers())
    with_generation(window, max_tokens=100000)
    _send(qtbot, window, "Go")
    run(loop, until(lambda: len(window.adapter.messages.messages()) == 2
                    and len(window.adapter.messages.messages()[-1].text) > 5))
    window.setWindowState(Qt.WindowState.WindowMinimized)
    run(loop, until(lambda: window.messages.delegate.streaming_note == "paused — window hidden",
                    what="the answer's own note"))
    window.doors.chat.stop()  # while paused: the engine is held between two tokens
    run(loop, until(idle(window), timeout=15, what="the stopped answer"))
    answer = window.adapter.messages.messages()[-1]
    assert answer.state == MessageState.COMPLETE and answer.stats.finish_reason == "cancelled"
    window.setWindowState(Qt.WindowState.WindowNoState)
    run(loop, until(lambda: window.messages.delegate.streaming_note == "writing…", what="full speed again"))
    started = time.monotonic()
    run(loop, service_of(window).shutdown())  # closing after a pause does not wait for the engine
    assert time.monotonic() - started < 10
