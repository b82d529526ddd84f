"""A reasoning model's answer in the window: a "Thinking" section above it, open while it
thinks, closed once the answer starts, opened and closed again by a click."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest

from app.core.conversation import MessageState
from tests.helpers.thinking_gguf import ANSWER, THOUGHT
from tests.ui.conftest import idle, run, until


def test_the_thinking_section_closes_when_the_answer_starts_and_opens_on_a_click(
        make_window, loop, qtbot, thinking_model: Path) -> None:
    window = make_window(model=thinking_model)
    qtbot.keyClicks(window.composer.edit, "Hi")
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    run(loop, until(lambda: idle(window)() and len(window.adapter.messages.messages()) == 2, what="the answer"))
    view, model = window.messages, window.adapter.messages
    answer = model.messages()[-1]
    assert (answer.text, answer.thinking) == (ANSWER, THOUGHT)
    section = view.delegate.thinking

    # While the answer had not started, the section was open; now it is closed.
    assert section.is_open(dataclasses.replace(answer, text="", state=MessageState.STREAMING,
                                               id=answer.id + 1000))
    assert not section.is_open(answer)
    assert section.header(answer).startswith("▸ Thought for ")
    index = model.index(model.rowCount() - 1)
    closed = view.visualRect(index)

    header = QPoint(closed.left() + 40, closed.top() + view.delegate._thinking_top(index) + 4)
    assert view.delegate.thinking_header_at(index, header)
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=header)
    run(loop, until(lambda: view.visualRect(index).height() > closed.height(), what="the opened section"))
    assert section.is_open(answer) and section.header(answer).startswith("▾ ")
    opened = view.visualRect(index).height()
    assert opened - closed.height() >= view.fontMetrics().height(), "the thinking text takes room"
    assert view.delegate.thinking.body(answer, view.delegate._text_width(answer), False).height > 0

    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=header)
    run(loop, until(lambda: view.visualRect(index).height() == closed.height(), what="the closed section"))
    # The answer's own text is what Copy gives, without the thinking.
    view.setCurrentIndex(index)
    view.copy_current()
    from PySide6.QtGui import QGuiApplication
    assert QGuiApplication.clipboard().text() == ANSWER


def test_the_chat_settings_switch_thinking_off_for_a_model_that_can(make_window, loop, monkeypatch,
                                                                     thinking_model: Path) -> None:
    from app.ui.settings.dialogs import ConversationSettingsDialog

    window = make_window(model=thinking_model)
    seen = {}

    def accept(dialog: ConversationSettingsDialog) -> int:
        seen["enabled"] = dialog.form.thinking.isEnabled()
        dialog.form.thinking.setChecked(False)
        return 1

    monkeypatch.setattr(ConversationSettingsDialog, "exec", accept)
    window.edit_chat_settings()
    run(loop, until(lambda: not window.doors.chat.conversation_settings()[1].thinking, what="the saved switch"))
    assert seen["enabled"]


def test_the_switch_is_disabled_for_a_model_without_one(make_window, monkeypatch) -> None:
    from app.ui.settings.dialogs import ConversationSettingsDialog

    window = make_window()  # the tiny model: no thinking in its template
    seen = {}

    def accept(dialog: ConversationSettingsDialog) -> int:
        seen["enabled"] = dialog.form.thinking.isEnabled()
        seen["ticked"] = dialog.form.thinking.isChecked()
        seen["why"] = dialog.form.thinking_note.text() if dialog.form.thinking_note.isVisibleTo(dialog) else ""
        seen["kept"] = dialog.form.value().thinking
        return 0

    monkeypatch.setattr(ConversationSettingsDialog, "exec", accept)
    window.edit_chat_settings()
    # Not ticked for a model that cannot think, with why in words beside it (not only in a tooltip);
    # the chat's own setting stays as it was for a model that can.
    assert not seen["enabled"] and not seen["ticked"]
    assert seen["why"] == "The model in use cannot think before answering."
    assert seen["kept"] is True


def test_a_model_that_always_thinks_shows_the_box_ticked_and_says_it_has_no_switch(qtbot) -> None:
    from app.core.generation import GenerationSettings
    from app.ui.settings.dialogs import ConversationSettingsDialog

    dialog = ConversationSettingsDialog("", GenerationSettings(thinking=False), None, can_switch_thinking=False,
                                        always_thinks=True)
    qtbot.addWidget(dialog)
    assert dialog.form.thinking.isChecked() and not dialog.form.thinking.isEnabled()
    assert "always thinks first" in dialog.form.thinking_note.text()
    assert dialog.form.value().thinking is False


def test_the_default_says_when_the_model_in_use_cannot_follow_it(make_window, monkeypatch) -> None:
    from app.ui.settings.dialogs import SettingsDialog

    window = make_window()  # the tiny model, loaded: no thinking in its template
    seen = {}

    def accept(dialog: SettingsDialog) -> int:
        seen["enabled"] = dialog.form.thinking.isEnabled()
        seen["why"] = dialog.form.thinking_note.text() if dialog.form.thinking_note.isVisibleTo(dialog) else ""
        return 0

    monkeypatch.setattr(SettingsDialog, "exec", accept)
    window.edit_settings()
    assert seen["enabled"]  # a default for new chats: other models can follow it
    assert seen["why"] == "Only for models that can, such as Qwen3: the model in use cannot think before answering."
