"""Memory in the chat: "used N memories" under an answer, its list on click, and a chat's "Don't use my memories"."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt

from app.core.memories import MemoryOrigin
from app.core.store.history import HistoryStore
from app.engine import protocol as p
from app.ui.messages.message_memories import used_words
from app.ui.settings.dialogs import ConversationSettingsDialog
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import idle, run, stored, until

ADA = "My daughter is called Ada."
WORK = "I write Python at work."


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine()


@pytest.fixture
def window(make_window, engine, loop):
    made = make_window(engine=engine)
    for text in (ADA, WORK):
        run(loop, made.doors.memory.add(text, MemoryOrigin.HAND))
    return made


def ask(window, loop, question: str):
    assert window.doors.chat.send(question)
    run(loop, until(idle(window)))
    run(loop, until(lambda: window.adapter.messages.rowCount() >= 2 and
                    window.adapter.messages.messages()[-1].state.value != "streaming", what="the answer shown"))
    view = window.messages
    return view.model().index(view.model().rowCount() - 1, 0)


def used_point(window, index) -> QPoint | None:
    """A point on the row's "used N memories", found as a person's pointer would: along its footer."""
    delegate = window.messages.delegate
    window.messages.scrollTo(index)
    actions = delegate.layout(index).actions
    for x in range(actions.left(), actions.right(), 2):
        point = QPoint(x, actions.center().y())
        if delegate.memories_at(index, point):
            return point
    return None


def last_prompt(engine: ScriptedEngine) -> str:
    generated = [request for request in engine.requests if isinstance(request, p.Generate)][-1]
    return "\n".join(message.content for message in generated.messages)


def test_an_answer_that_used_memories_says_so_and_lists_them_on_click(window, loop, qtbot) -> None:
    index = ask(window, loop, "What is my daughter's name?")
    answer = window.messages.delegate.message(index)
    assert len(answer.memories) == 2 and used_words(answer) == "used 2 memories"
    point = used_point(window, index)
    assert point is not None, "the footer has its words to click"
    qtbot.mouseClick(window.messages.viewport(), Qt.MouseButton.LeftButton, pos=point)
    run(loop, until(lambda: window.memory.popup is not None and window.memory.popup.isVisible(), what="the list"))
    popup = window.memory.popup
    assert [item.text() for item in popup.items] == [f"• {ADA}", f"• {WORK}"]
    assert not popup.forgotten.isVisibleTo(popup)

    # One forgotten since: it is not shown again, and the list says so.
    run(loop, window.doors.memory.remove(answer.memories[0]))
    qtbot.mouseClick(window.messages.viewport(), Qt.MouseButton.LeftButton, pos=point)
    run(loop, until(lambda: window.memory.popup is not popup and window.memory.popup is not None, what="a new list"))
    popup = window.memory.popup
    assert [item.text() for item in popup.items] == [f"• {WORK}"]
    assert popup.forgotten.text() == "1 memory it used has been forgotten since."
    popup.manage.click()
    assert window.memory.window is not None and window.memory.window.isVisible()
    # A list nothing opens them from (the quick-ask window's) does not offer them.
    window.messages.delegate.memories_shown = False
    assert used_point(window, index) is None


def test_an_answer_without_memories_has_nothing_to_click(window, loop) -> None:
    run(loop, window.doors.memory.clear())
    index = ask(window, loop, "Hello")
    assert window.messages.delegate.message(index).memories == ()
    assert used_point(window, index) is None


def test_dont_use_my_memories_in_a_chats_settings_leaves_them_out_of_its_answers(window, loop, engine,
                                                                                 monkeypatch) -> None:
    ask(window, loop, "What is my daughter's name?")
    assert ADA in last_prompt(engine)
    seen: list[bool] = []

    def tick(dialog: ConversationSettingsDialog) -> int:
        seen.append(dialog.no_memory.isChecked())
        dialog.no_memory.setChecked(True)
        return 1

    monkeypatch.setattr(ConversationSettingsDialog, "exec", tick)
    window.edit_chat_settings()
    chat = window.doors.chat
    run(loop, until(lambda: not chat.conversation.memory, what="the chat's switch"))
    assert not stored(loop, window, HistoryStore.get_conversation, chat.conversation.id).memory
    index = ask(window, loop, "And how old is she?")
    assert ADA not in last_prompt(engine)
    assert window.messages.delegate.message(index).memories == ()
    window.edit_chat_settings()
    assert seen == [False, True], "the dialog shows the chat's switch as saved"
