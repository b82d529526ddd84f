"""The chat window driven as a user drives it, offscreen, on the tiny model."""

from __future__ import annotations

import os

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from app.core.conversation import MessageState, Role
from app.ui.settings.dialogs import EditMessageDialog
from app.ui.messages.message_delegate import stats_line
from app.core.store.history import HistoryStore
from tests.helpers.vision_controller import ImageApi
from tests.ui.conftest import idle, long_answers, run, service_of, until, with_generation


def _type_and_send(qtbot, window, text: str) -> None:
    qtbot.keyClicks(window.composer.edit, text)
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)


def _last(window):
    return window.adapter.messages.messages()[-1]


def _answer_length(window) -> int:
    """How much of the answer is on screen (0 before it starts)."""
    rows = window.adapter.messages.messages()
    return len(rows[-1].text) if rows and rows[-1].role == Role.ASSISTANT else 0


def test_send_streams_then_shows_stats(make_window, loop, qtbot) -> None:
    window = make_window()
    assert window.model_label.text() == window.doors.model.model_detail != ""
    assert window.device_label.text() == "CPU"
    _type_and_send(qtbot, window, "Hello there")
    assert window.composer.edit.toPlainText() == ""
    assert window.composer.button.text() == "Stop"
    run(loop, until(idle(window), what="the answer"))
    user, answer = window.adapter.messages.messages()
    assert user.role == Role.USER and user.text == "Hello there"
    assert answer.role == Role.ASSISTANT and answer.state == MessageState.COMPLETE and answer.text
    assert answer.stats.tokens == 24 and answer.stats.device == "CPU"
    assert "tok/s" in stats_line(answer.stats) and "CPU" in stats_line(answer.stats)
    # Never more view updates than tokens (test_deltas_are_coalesced_per_frame: fewer).
    assert 1 <= window.adapter.bridge.emitted <= answer.stats.tokens
    assert window.composer.button.text() == "Send"
    assert window.conversation_list.model().rowCount() == 1
    assert window.header.title.full_text() == "Hello there"
    assert window.windowTitle() == "Hello there – Kestrel"


def test_deltas_are_coalesced_per_frame(make_window, loop) -> None:
    from app.core.conversation import Message

    window = make_window(start=False)
    model, bridge = window.adapter.messages, window.adapter.bridge
    model.append(Message(7, 1, Role.ASSISTANT, "", 0.0, MessageState.STREAMING, None))
    changes = []
    model.dataChanged.connect(lambda *_: changes.append(1))
    for i in range(100):
        bridge.push(7, f"w{i} ")
    assert model.message(0).text == "" and not changes  # nothing until the next frame
    run(loop, until(lambda: model.message(0).text != "", what="the next frame"))
    assert model.message(0).text == "".join(f"w{i} " for i in range(100)) and len(changes) == 1


def test_shift_enter_makes_a_new_line(make_window, qtbot) -> None:
    window = make_window()
    qtbot.keyClicks(window.composer.edit, "one")
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(window.composer.edit, "two")
    assert window.composer.edit.toPlainText() == "one\ntwo"
    assert window.adapter.messages.rowCount() == 0


def test_stop_button_mid_answer_keeps_the_text(make_window, loop, qtbot) -> None:
    window = make_window(engine=long_answers())
    with_generation(window, max_tokens=100000)
    _type_and_send(qtbot, window, "Tell me everything")
    run(loop, until(lambda: _answer_length(window) > 40, what="some text"))
    qtbot.mouseClick(window.composer.button, Qt.MouseButton.LeftButton)
    run(loop, until(idle(window), what="the stop"))
    answer = _last(window)
    assert answer.stats.finish_reason == "cancelled" and len(answer.text) > 40
    assert "stopped" in stats_line(answer.stats) and window.composer.button.text() == "Send"


def test_escape_stops_too(make_window, loop, qtbot) -> None:
    window = make_window(engine=long_answers())
    with_generation(window, max_tokens=100000)
    _type_and_send(qtbot, window, "Go on")
    run(loop, until(lambda: _answer_length(window) > 10, what="some text"))
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Escape)
    run(loop, until(idle(window), what="the stop"))
    assert _last(window).stats.finish_reason == "cancelled"


def test_regenerate_replaces_the_last_answer(make_window, loop, qtbot) -> None:
    window = make_window()
    with_generation(window, temperature=1.0, seed=-1)
    _type_and_send(qtbot, window, "Hello")
    run(loop, until(idle(window)))
    first = _last(window)
    index = window.adapter.messages.index(1)
    # The icon is on show without hovering or selecting first.
    regenerate = dict(window.messages.delegate.action_rects(index))["regenerate"]
    qtbot.mouseClick(window.messages.viewport(), Qt.MouseButton.LeftButton, pos=regenerate.center())
    run(loop, until(lambda: idle(window)() and _last(window).id != first.id))
    rows = window.adapter.messages.messages()
    assert len(rows) == 2 and rows[1].id != first.id and rows[1].state == MessageState.COMPLETE


def test_edit_and_resend_replaces_what_followed(make_window, loop, qtbot, monkeypatch) -> None:
    window = make_window()
    _type_and_send(qtbot, window, "First question")
    run(loop, until(idle(window)))
    _type_and_send(qtbot, window, "Second question")
    run(loop, until(idle(window)))
    assert window.adapter.messages.rowCount() == 4

    def accept(dialog: EditMessageDialog) -> int:
        dialog.edit.setPlainText("First question, edited")
        return 1

    monkeypatch.setattr(EditMessageDialog, "exec", accept)
    edit = dict(window.messages.delegate.action_rects(window.adapter.messages.index(0)))["edit"]
    qtbot.mouseClick(window.messages.viewport(), Qt.MouseButton.LeftButton, pos=edit.center())
    run(loop, until(lambda: idle(window)() and window.adapter.messages.rowCount() == 2
                    and _last(window).state == MessageState.COMPLETE))
    user, answer = window.adapter.messages.messages()
    assert user.text == "First question, edited" and answer.state == MessageState.COMPLETE


def test_history_is_restored_after_reopening(make_window, loop, qtbot) -> None:
    window = make_window()
    _type_and_send(qtbot, window, "Remember me")
    run(loop, until(idle(window)))
    before = [(m.role, m.text) for m in window.adapter.messages.messages()]
    run(loop, service_of(window).shutdown())
    window.close()
    again = make_window()
    assert again.conversation_list.model().rowCount() == 1
    assert [(m.role, m.text) for m in again.adapter.messages.messages()] == before


def test_engine_killed_mid_answer_keeps_the_text_on_screen_and_says_why(make_window, loop, qtbot) -> None:
    # A real engine's SIGKILL mid-answer: tests/service/test_real_engine_flow.py.
    engine = long_answers()
    window = make_window(engine=engine)
    with_generation(window, max_tokens=100000)
    _type_and_send(qtbot, window, "Keep talking")
    run(loop, until(lambda: _answer_length(window) > 30))
    engine.die()  # as SIGKILL
    run(loop, until(idle(window), what="the crash to be noticed"))
    cut = _last(window)
    assert cut.state == MessageState.INTERRUPTED and len(cut.text) > 30
    assert window.banner_row.isVisible() and "stopped unexpectedly" in window.banner.text()
    assert "Interrupted" in _footer(window, cut)
    assert window.device_label.text() == "No device" and window.composer.button.text() == "Send"


def _footer(window, message) -> str:
    return ("Interrupted: " + (stats_line(message.stats) or "the answer was cut off")
            if message.state == MessageState.INTERRUPTED else stats_line(message.stats))


def test_importing_a_corrupt_file_is_refused_with_a_message(make_window, loop, tmp_path) -> None:
    window = make_window()
    bad = tmp_path / "broken model.gguf"
    bad.write_bytes(os.urandom(50_000))
    before = service_of(window).session.setup.library.list()
    run(loop, service_of(window).library.add(str(bad), reference=False, load=True))
    assert window.banner_row.isVisible() and "not a GGUF" in window.banner.text()
    assert service_of(window).session.setup.library.list() == before
    assert window.doors.model.model_state.value == "ready"


def test_copy_last_answer_shortcut(make_window, loop, qtbot) -> None:
    window = make_window()
    _type_and_send(qtbot, window, "Hello")
    run(loop, until(idle(window)))
    QGuiApplication.clipboard().clear()
    window.action_copy_last.trigger()
    assert QGuiApplication.clipboard().text() == _last(window).text


def test_closing_mid_answer_saves_what_was_shown(make_window, loop, qtbot) -> None:
    window = make_window(engine=long_answers())
    with_generation(window, max_tokens=100000)
    _type_and_send(qtbot, window, "A long one")
    run(loop, until(lambda: _answer_length(window) > 30))
    pid = service_of(window).session.client.pid
    window.close()
    run(loop, service_of(window).shutdown())
    shown = _last(window)
    with HistoryStore(service_of(window)._history_path) as store:
        stored = store.get_message(shown.id)
    # Closing stops the answer like the Stop button: saved whole, marked as stopped.
    assert stored.state == MessageState.COMPLETE and stored.stats.finish_reason == "cancelled"
    assert len(stored.text) >= 30 and stored.text == shown.text
    assert pid is not None and service_of(window).session.client.pid is None


def test_a_keyboard_only_user_can_send_select_copy_and_edit(make_window, loop, qtbot, monkeypatch) -> None:
    window = make_window()
    assert window.composer.edit.hasFocus()
    _type_and_send(qtbot, window, "Typed without a mouse")
    run(loop, until(idle(window)))
    # Tab from the box reaches the paperclip, the picture button (for a model that sees), then
    # Documents (Send, disabled with the box empty, is passed over); Shift+Tab from the box
    # reaches the messages; arrows select; Ctrl+C copies.
    ImageApi(window.doors.attach, window.doors.chat, available=True)
    window.attachments.refresh_vision()
    reached = []
    for _ in range(3):
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        reached.append(QApplication.focusWidget())
    assert reached == [window.composer.attach_button, window.composer.image_button, window.composer.documents_button]
    window.composer.edit.setFocus()
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier)
    assert window.messages.hasFocus()
    qtbot.keyClick(window.messages, Qt.Key.Key_End)
    qtbot.keyClick(window.messages, Qt.Key.Key_Up)
    assert window.messages.currentIndex().row() == 0
    QGuiApplication.clipboard().clear()
    qtbot.keyClick(window.messages, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == "Typed without a mouse"
    edited = []
    monkeypatch.setattr(window, "edit_message", lambda message_id, text: edited.append(text))
    qtbot.keyClick(window.messages, Qt.Key.Key_F2)
    assert edited == ["Typed without a mouse"]


def test_an_answer_says_when_the_models_template_was_not_used(make_window, loop, qtbot, tmp_path) -> None:
    from PySide6.QtCore import QEvent, QPoint
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtWidgets import QStyleOptionViewItem, QToolTip

    from tests.helpers.tiny_gguf import build_tiny_gguf

    model = build_tiny_gguf(tmp_path / "bad template.gguf", chat_template="{% for m in messages %}{{ m }")
    window = make_window(model=model)
    _type_and_send(qtbot, window, "Hello")
    run(loop, until(idle(window), what="the answer"))
    answer = _last(window)
    assert answer.stats.chat_format == "chatml"
    assert "built-in chat format (the model's own failed)" in stats_line(answer.stats)
    view = window.messages
    index = window.adapter.messages.index(1, 0)
    event = QHelpEvent(QEvent.Type.ToolTip, QPoint(5, 5), view.viewport().mapToGlobal(QPoint(5, 5)))
    assert view.itemDelegate().helpEvent(event, view, QStyleOptionViewItem(), index)
    assert "has an error on its line 1" in QToolTip.text()
