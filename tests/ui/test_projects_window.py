"""The window's projects over the real service and history file: the Projects grouping above the chat list (wired here
as the sidebar will wire it), the project dialog (made, refused in words, edited), a new chat in a project opened with
its instructions, the chat list narrowed to a project's chats and the search within it, a chat moved out, a project
removed with its chats kept."""

from __future__ import annotations

import pytest

from app.core.conversation import Role
from app.core.projects import MAX_INSTRUCTIONS
from app.service.doors.projects import ProjectsDoor
from app.ui.projects.project_dialog import ProjectChoices, ProjectDialog
from app.ui.projects.project_scope import ProjectScope
from app.ui.projects.projects_host import ProjectsHost
from app.ui.projects.projects_panel import ALL_CHATS, ProjectsPanel
from app.ui.state.conversation_model import ConversationRoles
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import idle, run, service_of, until

FRENCH = "Always answer in French."


@pytest.fixture
def window(make_window):
    return make_window(engine=ScriptedEngine())


@pytest.fixture
def host(window) -> ProjectsHost:
    """The wiring the sidebar and the window will have: the panel above the chat list, the search through the scope."""
    sidebar = window.sidebar
    panel = ProjectsPanel(sidebar)
    sidebar.layout().insertWidget(sidebar.layout().indexOf(sidebar.conversation_list), panel)
    scope = ProjectScope(sidebar.filter.set_matches)
    made = ProjectsHost(ProjectsDoor(service_of(window)), window.doors.chat, panel, scope, spawn=window.adapter.spawn,
                        problem=window.adapter.problem.emit, subscribe=window.doors.subscribe,
                        choices=lambda: ProjectChoices(models=(("tiny", "Tiny model"),), tools=("files",),
                                                       collections=("Papers",)),
                        parent=window)
    made.refresh()
    return made


def names(host: ProjectsHost) -> list[str]:
    model = host.panel.model
    return [model.index(row).data() for row in range(model.rowCount())]


def shown_chats(window) -> set[int]:
    view = window.sidebar.filter
    return {view.index(row, 0).data(ConversationRoles.ID) for row in range(view.rowCount())}


def make_project(loop, host: ProjectsHost, name: str, instructions: str = "") -> ProjectDialog:
    host.panel.new_button.click()
    dialog = host.dialog
    assert dialog is not None and dialog.isVisible() and dialog.windowTitle() == "New project"
    dialog.name.setText(name)
    dialog.instructions.setPlainText(instructions)
    dialog.save.click()
    run(loop, until(lambda: not dialog.isVisible() or dialog.refusal.isVisible(), what="the dialog's answer"))
    return dialog


def test_a_project_made_in_the_dialog_starts_chats_with_its_instructions_and_groups_them(window, host, loop) -> None:
    doors = window.doors
    assert doors.chat.send("A chat outside any project")
    run(loop, until(idle(window)))
    outside = doors.chat.conversation.id
    assert names(host) == [ALL_CHATS]
    dialog = make_project(loop, host, "Français", FRENCH)
    assert not dialog.isVisible()
    # The new project is chosen and the list shows its chats: none yet.
    run(loop, until(lambda: names(host) == [ALL_CHATS, "Français (0)"] and host.panel.chosen_id is not None
                    and host.scope.project_id == host.panel.chosen_id and shown_chats(window) == set(),
                    what="the project listed and chosen"))

    host.panel.actions_by_name["new_chat"].trigger()
    run(loop, until(lambda: doors.chat.conversation is not None and doors.chat.conversation.id != outside,
                    what="the project's new chat opened"))
    chat = doors.chat.conversation
    assert chat.system_prompt == FRENCH and chat.project_id == host.panel.chosen_id
    assert doors.chat.send("What is the capital of Italy?")
    run(loop, until(idle(window)))
    run(loop, until(lambda: names(host) == [ALL_CHATS, "Français (1)"], what="the count"))
    assert shown_chats(window) == {chat.id}, "only the project's chats"

    host.scope.set_search({outside})  # what the window's search gives the scope once wired (the report's lines)
    assert shown_chats(window) == set(), "the search within the project"
    host.scope.set_search({outside, chat.id})
    assert shown_chats(window) == {chat.id}, "the search's finds narrowed to the project"
    host.scope.set_search(None)
    host.panel.choose(None)
    host.panel.projectChosen.emit(None)
    run(loop, until(lambda: shown_chats(window) == {outside, chat.id}, what="all chats again"))


def test_a_refused_name_is_said_in_the_dialog_which_stays_as_typed(window, host, loop) -> None:
    make_project(loop, host, "Garden")
    dialog = make_project(loop, host, "GARDEN", "Be brief.")
    assert dialog.isVisible() and 'already a project called "Garden"' in dialog.refusal.text()
    assert dialog.instructions.toPlainText() == "Be brief." and dialog.save.isEnabled()
    dialog.instructions.setPlainText("x" * (MAX_INSTRUCTIONS + 1))
    assert not dialog.save.isEnabled() and "too long" in dialog.count.text() and not dialog.refusal.isVisible()
    dialog.reject()


def test_edit_move_out_and_remove(window, host, loop) -> None:
    make_project(loop, host, "Trip", "Plan by the day.")
    run(loop, until(lambda: names(host) == [ALL_CHATS, "Trip (0)"] and host.scope.project_id is not None,
                    what="listed and chosen"))
    project_id = host.panel.chosen_id
    host.panel.actions_by_name["edit"].trigger()
    dialog = host.dialog
    assert dialog.windowTitle() == "Edit project" and dialog.name.text() == "Trip"
    dialog.instructions.setPlainText("Plan by the hour.")
    dialog.model.setCurrentIndex(dialog.model.findData("tiny"))
    dialog.save.click()
    run(loop, until(lambda: not dialog.isVisible(), what="saved"))
    edited = run(loop, ProjectsDoor(service_of(window)).get(project_id))
    assert (edited.instructions, edited.model) == ("Plan by the hour.", "tiny")

    host.panel.actions_by_name["new_chat"].trigger()
    run(loop, until(lambda: names(host) == [ALL_CHATS, "Trip (1)"] and window.doors.chat.conversation is not None
                    and window.doors.chat.conversation.project_id == project_id, what="the new chat counted and open"))
    chat = window.doors.chat.conversation
    menu = host.move_menu(chat.id, window)
    [no_project, trip] = menu.actions()
    assert trip.isChecked() and not no_project.isChecked()
    no_project.trigger()
    run(loop, until(lambda: names(host) == [ALL_CHATS, "Trip (0)"], what="moved out"))
    assert shown_chats(window) == set(), "the chat left the project's list"

    host.move_menu(chat.id, window).actions()[1].trigger()
    run(loop, until(lambda: names(host) == [ALL_CHATS, "Trip (1)"], what="moved back"))
    host.confirm = lambda question: "Its chats are kept" in question
    host.panel.actions_by_name["remove"].trigger()
    run(loop, until(lambda: names(host) == [ALL_CHATS], what="removed"))
    assert host.panel.chosen_id is None and chat.id in shown_chats(window)
    assert [m.role for m in run(loop, service_of(window).conversations.messages(chat.id))] in ([], [Role.USER])
