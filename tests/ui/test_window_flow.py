"""No dead ends in the window: sends wait their turn across chats, drafts stay, chats go out and come back."""

from __future__ import annotations

import json
import os
import signal

from PySide6.QtCore import Qt

from app.core.conversation import MessageState, Role
from app.ui.chat.chat_files import ChatFiles
from app.ui.common.save_files import file_name_for
from app.ui.state.conversation_model import ConversationRoles
from tests.ui.conftest import idle, long_answers, run, service_of, until, with_generation


def _type_and_send(qtbot, window, text: str) -> None:
    qtbot.keyClicks(window.composer.edit, text)
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)


def _open_id(window) -> int | None:
    return window.doors.chat.conversation.id if window.doors.chat.conversation is not None else None


def _answer_length(window) -> int:
    rows = window.adapter.messages.messages()
    return len(rows[-1].text) if rows and rows[-1].role == Role.ASSISTANT else 0


def _queue_settled(window):
    doors = window.doors
    return lambda: doors.chat.answering_id is None and not doors.chat.waiting_ids


def test_a_send_in_another_chat_waits_its_turn_and_stop_belongs_to_its_chat(make_window, loop, qtbot) -> None:
    window = make_window(engine=long_answers())  # the first answer runs through every step
    with_generation(window, loop, max_tokens=100000)
    _type_and_send(qtbot, window, "First chat, keep talking")
    first = _open_id(window)
    run(loop, until(lambda: _answer_length(window) > 20, what="the first answer"))

    window.new_conversation()
    with_generation(window, loop, max_tokens=8)
    _type_and_send(qtbot, window, "Second chat question")
    doors = window.doors
    run(loop, until(lambda: _open_id(window) not in (None, first) and _open_id(window) in doors.chat.waiting_ids
                    and window.adapter.messages.rowCount() == 1, what="the second chat to wait"))
    second = _open_id(window)
    # Never silently ignored: the message is in its chat, and the chat says it waits.
    assert [m.text for m in window.adapter.messages.messages()] == ["Second chat question"]
    assert window.composer.edit.toPlainText() == ""
    assert "waits for the answer" in window.composer.note.text() and window.composer.note.isVisible()
    assert window.composer.button.text() == "Stop"
    # The activity names the chat that is answering, and a click opens it.
    first_title = window.adapter.conversations.conversation(first).title
    run(loop, until(lambda: window.status.activity_text().startswith(f"“{first_title}”"),
                    what="the activity to name chat one"))

    # Stop here takes the second chat out of the line; the first answer goes on.
    qtbot.mouseClick(window.composer.button, Qt.MouseButton.LeftButton)
    run(loop, until(lambda: second not in doors.chat.waiting_ids, what="the wait to be dropped"))
    assert doors.chat.answering_id == first and window.composer.button.text() == "Send"
    assert not window.composer.note.isVisible()

    # Sent again, it waits; stopping the first answer lets it run.
    _type_and_send(qtbot, window, "Second chat, again")
    run(loop, until(lambda: second in doors.chat.waiting_ids))
    window.status.activity.click()
    run(loop, until(lambda: _open_id(window) == first, what="the activity click to open chat one"))
    assert window.composer.button.text() == "Stop"
    qtbot.mouseClick(window.composer.button, Qt.MouseButton.LeftButton)
    run(loop, until(_queue_settled(window), timeout=90, what="the second answer"))
    run(loop, window.doors.chat.open_conversation(second))
    roles = [m.role for m in window.adapter.messages.messages()]
    assert roles[-1] == Role.ASSISTANT and window.adapter.messages.messages()[-1].state == MessageState.COMPLETE


def test_drafts_survive_switching_chats_and_restarting(make_window, loop, qtbot) -> None:
    window = make_window()
    _type_and_send(qtbot, window, "A chat to come back to")
    run(loop, until(idle(window)))
    first = _open_id(window)
    qtbot.keyClicks(window.composer.edit, "half a thought")
    window.new_conversation()
    run(loop, until(lambda: _open_id(window) is None))
    assert window.composer.edit.toPlainText() == ""
    qtbot.keyClicks(window.composer.edit, "a new chat's draft")
    window.open_chat(first)
    run(loop, until(lambda: _open_id(window) == first))
    assert window.composer.edit.toPlainText() == "half a thought"
    run(loop, until(lambda: window.adapter.conversations.index(0).data(
        ConversationRoles.HAS_DRAFT) is True, what="the draft marker"))
    window.close()
    run(loop, service_of(window).shutdown())
    again = make_window()
    run(loop, again.doors.chat.open_conversation(first))
    run(loop, until(lambda: _open_id(again) == first))
    assert again.composer.edit.toPlainText() == "half a thought"
    again.new_conversation()
    run(loop, until(lambda: _open_id(again) is None))
    assert again.composer.edit.toPlainText() == "a new chat's draft"


def test_export_then_import_gives_the_same_chat(make_window, loop, qtbot, tmp_path) -> None:
    window = make_window()
    _type_and_send(qtbot, window, "Export me, please")
    run(loop, until(idle(window)))
    before = [(m.role, m.text) for m in window.adapter.messages.messages()]
    title = window.doors.chat.conversation.title
    asked = []

    def save_as(_parent, _caption, suggested, _filter):
        asked.append(suggested)
        return str(tmp_path / ("chat.md" if suggested.endswith(".md") else "chat"))

    files = ChatFiles(window.adapter, window.doors.chat, window.doors.files, window, ask_save=save_as,
                      ask_open=lambda *_: str(tmp_path / "chat.json"))
    files.choose_export("markdown")
    files.choose_export("json")
    run(loop, until(lambda: (tmp_path / "chat.md").exists() and (tmp_path / "chat.json").exists()))
    assert asked[0].endswith(file_name_for(title, "markdown"))
    markdown = (tmp_path / "chat.md").read_text(encoding="utf-8")
    assert "Export me, please" in markdown and before[1][1].strip()[:20] in markdown
    assert json.loads((tmp_path / "chat.json").read_text(encoding="utf-8"))["format"] == "kestrel-chat"

    files.choose_import()
    run(loop, until(lambda: window.adapter.conversations.rowCount() == 2, what="the imported chat"))
    run(loop, until(lambda: _open_id(window) == window.adapter.conversations.index(0).data(
        ConversationRoles.ID), what="the import to open"))
    assert [(m.role, m.text) for m in window.adapter.messages.messages()] == before


def test_importing_a_file_that_is_not_a_chat_names_it(make_window, loop, tmp_path) -> None:
    window = make_window()
    bad = tmp_path / "not a chat.json"
    bad.write_text('{"format": "something else"}', encoding="utf-8")
    ChatFiles(window.adapter, window.doors.chat, window.doors.files, window,
              ask_open=lambda *_: str(bad)).choose_import()
    run(loop, until(lambda: window.banner_row.isVisible(), what="the message"))
    assert "not a chat.json" in window.banner.text()
    assert window.adapter.conversations.rowCount() == 0


def test_the_engine_banner_goes_once_a_new_engine_answers(make_window, loop, qtbot) -> None:
    engine = long_answers()
    window = make_window(engine=engine)
    with_generation(window, loop, max_tokens=100000)
    _type_and_send(qtbot, window, "Keep talking")
    run(loop, until(lambda: _answer_length(window) > 20))
    engine.die()  # as SIGKILL
    run(loop, until(idle(window), what="the crash to be noticed"))
    assert window.banner_row.isVisible() and "stopped unexpectedly" in window.banner.text()
    with_generation(window, loop, max_tokens=8)
    _type_and_send(qtbot, window, "Are you back?")
    run(loop, until(lambda: not window.banner_row.isVisible(), timeout=90, what="the banner to go"))
    run(loop, until(idle(window)))


def test_file_names_for_exports_are_safe_everywhere() -> None:
    assert file_name_for('What is 2/3? "Half" <maybe>', "markdown") == "What is 2 3 Half maybe.md"
    assert file_name_for("...", "json") == "Chat.json"
    assert file_name_for("x" * 300, "json") == "x" * 80 + "….json"  # no word to cut at: said cut
    long_title = "How do I read a large CSV file in Python without running out of memory on my laptop please"
    assert file_name_for(long_title, "markdown") == ("How do I read a large CSV file in Python without running out of memory on my"
                                                     "….md"), "cut at a word, and said"
    wide = file_name_for("写" * 100, "json")  # 3 bytes a character: the byte bound cuts first
    assert len(wide.encode("utf-8")) <= 200 + len("….json".encode("utf-8")) and wide.endswith("….json")


def test_a_chat_whose_settings_came_first_is_named_by_its_first_message(make_window, loop, qtbot) -> None:
    window = make_window()
    with_generation(window, loop, max_tokens=4)  # this makes the chat, before any message
    assert window.doors.chat.conversation.title == "New chat"
    _type_and_send(qtbot, window, "Plans for the garden")
    run(loop, until(idle(window)))
    assert window.doors.chat.conversation.title == "Plans for the garden"
    assert window.header.title.full_text() == "Plans for the garden"
    _type_and_send(qtbot, window, "And the shed?")
    run(loop, until(idle(window)))
    assert window.doors.chat.conversation.title == "Plans for the garden"


def test_the_model_picker_sets_this_chats_model_and_the_header_says_it(make_window, loop, qtbot) -> None:
    window = make_window()
    run(loop, service_of(window).library.refresh())
    run(loop, until(lambda: window.adapter.installed.rowCount() == 1, what="the library listing"))
    model = window.doors.model.model
    # The one model, loaded and used as the default, is listed once (it was twice: "Default model (…)" and itself).
    choices = [action.text().replace("&&", "&") for action in window.header.model_actions()]
    assert choices == [f"{model.title} (default)"]
    assert window.header.button_text() == model.title
    window.header.model_actions()[0].trigger()  # the default's entry: the chat follows the default
    _type_and_send(qtbot, window, "Which model answers?")
    run(loop, until(idle(window)))
    assert window.doors.chat.conversation_model_id() is None  # no model of its own: it follows the default
    assert window.header.button_text() == model.title
    # The manager is one click away.
    manager = next(a for a in window.header.model_menu.actions() if a.text().startswith("Manage models"))
    manager.trigger()
    assert window.model_manager is not None and window.model_manager.isVisible()


def test_the_composer_grows_with_its_text_up_to_a_limit(make_window, qtbot) -> None:
    from app.ui.chat.composer import MAX_LINES

    window = make_window(start=False)
    edit = window.composer.edit
    one_line = edit.height()
    edit.setPlainText("a\nb\nc")
    assert edit.height() > one_line
    three_lines = edit.height()
    edit.setPlainText("\n".join("line" for _ in range(MAX_LINES * 3)))
    capped = edit.height()
    assert capped > three_lines
    edit.setPlainText("\n".join("line" for _ in range(MAX_LINES * 6)))
    assert edit.height() == capped, "past the limit the text scrolls inside the box"
    edit.clear()
    assert edit.height() == one_line


def test_a_message_that_cannot_be_saved_comes_back_to_the_box(make_window, loop, qtbot, monkeypatch) -> None:
    from app.core.store.history import HistoryError, HistoryStore

    window = make_window()

    def refuse(*_args, **_kwargs):
        raise HistoryError("The disk is full.", service_of(window)._history_path, "disk full")

    monkeypatch.setattr(HistoryStore, "add_message", refuse)
    _type_and_send(qtbot, window, "Words worth keeping")
    run(loop, until(lambda: window.banner_row.isVisible(), what="the problem"))
    assert "disk is full" in window.banner.text() and "back in the message box" in window.banner.text()
    run(loop, until(lambda: window.composer.edit.toPlainText() == "Words worth keeping", what="the text back"))
    assert window.composer.button.text() == "Send"


def test_editing_while_the_chat_is_answered_says_why_before_any_typing(make_window, loop, qtbot, monkeypatch) -> None:
    from app.ui.settings.dialogs import EditMessageDialog

    window = make_window(engine=long_answers())
    with_generation(window, loop, max_tokens=100000)
    _type_and_send(qtbot, window, "A long answer, please")
    run(loop, until(lambda: _answer_length(window) > 10))
    opened = []
    monkeypatch.setattr(EditMessageDialog, "exec", lambda dialog: opened.append(dialog) or 1)
    first = window.adapter.messages.messages()[0]
    window.edit_message(first.id, first.text)
    assert opened == [] and "stop it (Esc)" in window.banner.text()
    window.stop_open_chat()
    run(loop, until(idle(window)))


def test_chat_settings_on_a_new_chat_keep_what_is_typed(make_window, loop, qtbot) -> None:
    window = make_window()
    qtbot.keyClicks(window.composer.edit, "half typed question")
    with_generation(window, loop, temperature=0.5)  # saves the new chat before any message
    run(loop, until(lambda: _open_id(window) is not None))
    assert window.composer.edit.toPlainText() == "half typed question"
    assert window.doors.chat.draft_for(_open_id(window)) == "half typed question"
    assert window.doors.chat.draft_for(None) == ""


def test_the_banner_goes_when_the_model_is_ready_again_after_the_engine_died_between_answers(
        make_window, loop, qtbot) -> None:
    window = make_window()
    _type_and_send(qtbot, window, "Hello")
    run(loop, until(idle(window)))
    os.kill(service_of(window).session.client.pid, signal.SIGKILL)
    run(loop, until(lambda: window.banner_row.isVisible(), what="the engine's death to be said"))
    _type_and_send(qtbot, window, "Still there?")
    run(loop, until(lambda: not window.banner_row.isVisible(), timeout=90, what="the banner to go"))
    run(loop, until(idle(window)))
