"""The projects wired into the window: the grouping in the sidebar, the search within a project, Move to project in the
chat list's menu, Export, File → Import a project…. Skipped until the sidebar and the window hold them (the wiring is
their owners' files); passed with that wiring applied."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QAction

from app.ui.projects.projects_panel import ALL_CHATS, ProjectRoles
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import idle, run, until
from tests.ui.test_projects_window import make_project, names, shown_chats


@pytest.fixture
def window(make_window):
    made = make_window(engine=ScriptedEngine())
    if not hasattr(made, "projects"):
        pytest.skip("the projects are not wired into the sidebar and the window yet")
    return made


def test_the_wired_window(window, loop, tmp_path) -> None:
    host, doors = window.projects, window.doors
    assert window.sidebar.projects is host.panel
    for text in ("Zebras in spring", "Falcons in autumn"):
        doors.chat.new_conversation()
        assert doors.chat.send(text)
        run(loop, until(idle(window), what="answered"))
    run(loop, until(lambda: names(host) == [ALL_CHATS], what="listed at start"))
    make_project(loop, host, "Birds", "Answer as an ornithologist.")
    run(loop, until(lambda: names(host) == [ALL_CHATS, "Birds (0)"] and host.scope.project_id is not None,
                    what="made and chosen"))
    host.panel.choose(None)
    host.panel.projectChosen.emit(None)
    run(loop, until(lambda: len(shown_chats(window)) == 2, what="all chats"))
    falcons = doors.chat.conversation.id
    view = window.sidebar.conversation_list
    window.sidebar.select(falcons)
    move = view.findChild(QAction, "moveToProject")
    move.menu().aboutToShow.emit()
    [no_project, birds] = move.menu().actions()
    assert no_project.isChecked()
    birds.trigger()
    run(loop, until(lambda: names(host) == [ALL_CHATS, "Birds (1)"], what="moved"))
    birds_id = host.panel.model.index(1).data(ProjectRoles.ID)
    host.panel.choose(birds_id)
    host.panel.projectChosen.emit(birds_id)
    run(loop, until(lambda: shown_chats(window) == {falcons}, what="the project's chats"))
    window.sidebar.search.setText("Zebras")
    run(loop, until(lambda: shown_chats(window) == set(), what="the search within the project"))
    window.sidebar.search.setText("Falcons")
    run(loop, until(lambda: shown_chats(window) == {falcons}, what="found in the project"))
    window.sidebar.search.clear()

    window.new_button.click()  # New chat while a project is chosen: a chat in it
    run(loop, until(lambda: names(host) == [ALL_CHATS, "Birds (2)"] and doors.chat.conversation.project_id == birds_id,
                    what="a new chat in the chosen project, open"))
    started = doors.chat.conversation
    assert started.project_id == birds_id and started.system_prompt == "Answer as an ornithologist."

    path = tmp_path / "birds.kestrel-project"
    host.ask_path = lambda save: path
    host.panel.actions_by_name["export"].trigger()
    run(loop, until(path.exists, what="exported"))
    [importing] = [a for a in window.menuBar().findChildren(QAction) if a.text() == "Import a &project…"]
    importing.trigger()
    run(loop, until(lambda: names(host) == [ALL_CHATS, "Birds (2)", "Birds (2) (2)"], what="imported"))
