"""ProjectsHost: the window's projects: the Projects grouping, the project dialog, a new chat in a project, moving a chat, files."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QAbstractItemView, QFileDialog, QMenu, QMessageBox, QWidget
from shiboken6 import isValid

from app.core.project_export import SUFFIX, ProjectFileError
from app.core.projects import Project, ProjectRefused
from app.core.store.history_errors import HistoryError
from app.core.store.projects import ProjectChanges
from app.library.model_files.model_purpose import ModelPurpose
from app.service.events import ConversationChanged, ConversationRemoved, ConversationsListed
from app.ui.projects.project_dialog import ProjectChoices, ProjectDialog, ProjectForm
from app.ui.projects.project_scope import ProjectScope
from app.ui.projects.projects_panel import ListedProject, ProjectRoles, ProjectsPanel
from app.ui.state.conversation_model import ConversationRoles

if TYPE_CHECKING:
    from app.service.doors.chat import ChatDoor
    from app.service.doors.projects import ProjectsDoor
    from app.service.documents_events import CollectionInfo
    from app.service.event_bus import Listener
    from app.service.library_events import ModelRow
    from app.tools.mcp_config import McpServerConfig

FILES = f"Kestrel projects (*{SUFFIX})"


def window_choices(rows: Iterable["ModelRow"], servers: Iterable["McpServerConfig"],
                   collections: Iterable["CollectionInfo"]) -> ProjectChoices:
    """What the project dialog offers in the window: the chat models listed, the enabled MCP servers, the collections."""
    return ProjectChoices(
        models=tuple((row.model.id, row.model.title) for row in rows if row.model.purpose == ModelPurpose.CHAT),
        tools=tuple(server.name for server in servers if server.enabled),
        collections=tuple(info.name for info in collections))


def remove_question(project: Project) -> str:
    return f"Remove the project “{project.name}”? Its chats are kept, in no project."


class ProjectsHost(QObject):
    """Drives `panel` and `scope` from the ProjectsDoor; every call runs on the service's loop (`spawn`) and a
    failure is said through `problem(words, kind)`, as the window's other problems are. `dialog` is the
    project dialog open now (one at a time). `ask_path(save)` and `confirm(question)` ask the person (file
    dialogs and a question box; a test gives its own)."""

    def __init__(self, door: "ProjectsDoor", chat: "ChatDoor", panel: ProjectsPanel, scope: ProjectScope, *,
                 spawn: Callable[[Coroutine[Any, Any, Any]], object], problem: Callable[[str, str], None],
                 subscribe: Callable[["Listener"], Callable[[], None]], choices: Callable[[], ProjectChoices],
                 parent: QWidget) -> None:
        super().__init__(parent)
        self._door, self._chat, self.panel, self.scope = door, chat, panel, scope
        self._spawn, self._problem, self._choices, self._parent = spawn, problem, choices, parent
        self.dialog: ProjectDialog | None = None
        self._known: dict[int, int | None] = {}  # chat id → its project, for the counts to follow moves
        self.ask_path: Callable[[bool], Path | None] = self._ask_path
        self.confirm: Callable[[str], bool] = lambda question: QMessageBox.question(
            parent, "Projects", question) == QMessageBox.StandardButton.Yes
        panel.projectChosen.connect(lambda project_id: self._run(self._show(project_id)))
        panel.newProjectRequested.connect(lambda: self.edit_project(None))
        panel.editRequested.connect(lambda project_id: self.edit_project(project_id))
        panel.newChatRequested.connect(lambda project_id: self._run(self._new_chat(project_id)))
        panel.exportRequested.connect(self.export_project)
        panel.removeRequested.connect(self.remove_project)
        unsubscribe = subscribe(self._heard)
        panel.destroyed.connect(lambda *_: unsubscribe())

    def refresh(self) -> None:
        """List the projects again (at start, and after the history changed elsewhere)."""
        self._run(self._refresh())

    # --- the dialog ------------------------------------------------------------------------

    def edit_project(self, project_id: int | None) -> None:
        """New project (None) or Edit project: the dialog, kept open until the door keeps what was typed."""
        project = self.panel.model.project(project_id) if project_id is not None else None
        if self.dialog is not None and isValid(self.dialog):
            self.dialog.close()
        dialog = self.dialog = ProjectDialog(self._choices(), project, self._parent)
        dialog.saveRequested.connect(lambda form: self._run(self._save(dialog, project, form)))
        dialog.open()

    async def _save(self, dialog: ProjectDialog, project: Project | None, form: ProjectForm) -> None:
        dialog.save.setEnabled(False)
        try:
            if project is None:
                kept = await self._door.add(form.name, form.instructions, model=form.model, tools=form.tools,
                                            collections=form.collections, memory=form.memory)
            else:
                kept = await self._door.edit(project.id, ProjectChanges(
                    name=form.name, instructions=form.instructions, model=form.model or "", tools=form.tools,
                    collections=form.collections, memory=form.memory))
        except (ProjectRefused, HistoryError) as exc:
            if isValid(dialog):
                dialog.refuse(str(exc))
            return
        except KeyError:
            if isValid(dialog):
                dialog.refuse("That project is no longer there.")
            return
        if isValid(dialog):
            dialog.accept()
        await self._refresh()
        if project is None:
            self.panel.choose(kept.id)
            await self._show(kept.id)

    # --- the panel's actions ---------------------------------------------------------------

    async def _show(self, project_id: int | None) -> None:
        chats = [] if project_id is None else await self._door.chats(project_id)
        if self.panel.chosen_id == project_id:  # not chosen otherwise meanwhile
            self.scope.set_project(project_id, (chat.id for chat in chats))

    def new_chat_in_chosen(self) -> bool:
        """The window's New chat while a project is chosen: a chat in that project, saved now with all of it
        (True). False: All chats is chosen, and the window's own new chat is the one."""
        project_id = self.panel.chosen_id
        if project_id is None:
            return False
        self._run(self._new_chat(project_id))
        return True

    async def _new_chat(self, project_id: int) -> None:
        made = await self._door.start_chat(project_id)
        await self._chat.open_conversation(made.id)

    def export_project(self, project_id: int) -> None:
        path = self.ask_path(True)
        if path is not None:
            self._run(self._export(project_id, path))

    async def _export(self, project_id: int, path: Path) -> None:
        # The save dialog asked before replacing a file that was there.
        await self._door.export(project_id, path, replace=True)

    def import_project(self) -> None:
        """Ask for a .kestrel-project file and add its project with its chats (the File menu's Import project…)."""
        path = self.ask_path(False)
        if path is not None:
            self._run(self._import(path))

    async def _import(self, path: Path) -> None:
        imported = await self._door.import_file(path)
        await self._refresh()
        if imported.left_out:
            self._problem(f"The project in {path} was imported as “{imported.project.name}”, but {imported.left_out}",
                          "other")

    def remove_project(self, project_id: int) -> None:
        project = self.panel.model.project(project_id)
        if project is not None and self.confirm(remove_question(project)):
            self._run(self._remove(project_id))

    async def _remove(self, project_id: int) -> None:
        await self._door.remove(project_id)
        if self.scope.project_id == project_id:
            self.panel.choose(None)
            self.scope.set_project(None)
        await self._refresh()

    def follow_chat_list(self, view: QAbstractItemView) -> QAction:
        """Give the chat list's menu "Move to project", for the chat under it; the action."""
        action = QAction("Move to project", view)
        action.setObjectName("moveToProject")
        holder = QMenu(view)
        action.setMenu(holder)

        def fill() -> None:
            holder.clear()
            chat_id = view.currentIndex().data(ConversationRoles.ID)
            if chat_id is not None:
                self._fill_move_menu(holder, int(chat_id))

        holder.aboutToShow.connect(fill)
        view.addAction(action)
        return action

    def move_menu(self, conversation_id: int, parent: QWidget) -> QMenu:
        """"Move to project": No project, then each project; the chat's own is checked."""
        menu = QMenu("Move to project", parent)
        self._fill_move_menu(menu, conversation_id)
        return menu

    def _fill_move_menu(self, menu: QMenu, conversation_id: int) -> None:
        current = self._known.get(conversation_id)
        rows = [(None, "No project")] + [(p.id, p.name) for p in self._listed_projects()]
        for project_id, words in rows:
            action = menu.addAction(words)
            action.setCheckable(True)
            action.setChecked(project_id == current)
            action.triggered.connect(lambda _=False, target=project_id: self._run(self._door.move(conversation_id,
                                                                                                   target)))

    # --- following the history -------------------------------------------------------------

    async def _refresh(self) -> None:
        projects = await self._door.listing()
        listed: list[ListedProject] = []
        known: dict[int, int | None] = {}
        for project in projects:
            chats = await self._door.chats(project.id)
            listed.append(ListedProject(project, len(chats)))
            known.update((chat.id, project.id) for chat in chats)
        self._known = known
        if not isValid(self.panel):
            return
        chosen = self.panel.chosen_id
        self.panel.model.reset_to(listed)
        self.panel.choose(chosen if chosen in {p.id for p in projects} else None)

    def _heard(self, event: object) -> None:
        if isinstance(event, ConversationsListed):  # at start, and after the history changed under the window
            self._run(self._refresh())
        elif isinstance(event, ConversationChanged):
            chat = event.conversation
            self.scope.heard(chat)
            if self._known.get(chat.id) != chat.project_id:
                self._known[chat.id] = chat.project_id
                self._run(self._refresh())  # a count changed
        elif isinstance(event, ConversationRemoved):
            self.scope.removed(event.conversation_id)
            if self._known.pop(event.conversation_id, None) is not None:
                self._run(self._refresh())

    def _listed_projects(self) -> list[Project]:
        model = self.panel.model
        found = (model.project(int(pid)) for row in range(1, model.rowCount())
                 if (pid := model.index(row).data(ProjectRoles.ID)) is not None)
        return [project for project in found if project is not None]

    def _ask_path(self, save: bool) -> Path | None:
        if save:
            chosen, _ = QFileDialog.getSaveFileName(self._parent, "Export project", f"project{SUFFIX}", FILES)
        else:
            chosen, _ = QFileDialog.getOpenFileName(self._parent, "Import project", "", FILES)
        return Path(chosen) if chosen else None

    def _run(self, work: Awaitable[Any]) -> None:
        async def said() -> None:
            try:
                await work
            except (ProjectRefused, ProjectFileError, HistoryError) as exc:
                self._problem(str(exc), "history" if isinstance(exc, HistoryError) else "other")
            except KeyError:
                self._problem("That project or chat is no longer there.", "history")

        self._spawn(said())
