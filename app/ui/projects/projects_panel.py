"""ProjectsPanel: the chat list's "Projects" grouping: All chats, then each project with its chats' count, and what to do with one."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from PySide6.QtCore import QAbstractListModel, QModelIndex, QObject, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QAction, QPalette
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QLabel, QListView, QToolButton, QVBoxLayout, QWidget

from app.core.projects import Project
from app.ui.common import icons

ALL_CHATS = "All chats"
# Rows the list shows before it scrolls: the chat list below keeps the room.
SHOWN_ROWS = 5

_Index = QModelIndex | QPersistentModelIndex


class ProjectRoles(IntEnum):
    """Item data roles; Qt.DisplayRole gives the name with the count."""

    ID = Qt.ItemDataRole.UserRole + 1  # None for All chats
    NAME = Qt.ItemDataRole.UserRole + 2


@dataclass(frozen=True)
class ListedProject:
    project: Project
    chats: int


class ProjectListModel(QAbstractListModel):
    """All chats, then the projects by name, each with how many chats it holds."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._items: list[ListedProject] = []

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # Override QAbstractListModel.
        return 0 if parent.isValid() else len(self._items) + 1

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:  # Override.
        if not index.isValid() or not 0 <= index.row() <= len(self._items):
            return None
        if index.row() == 0:
            return ALL_CHATS if role in (Qt.ItemDataRole.DisplayRole, ProjectRoles.NAME) else None
        item = self._items[index.row() - 1]
        if role == Qt.ItemDataRole.DisplayRole:
            return f"{item.project.name} ({item.chats})"
        if role == Qt.ItemDataRole.ToolTipRole:
            said = item.project.instructions[:300] or "No instructions"
            return f"{item.project.name}: {item.chats} chat{'s' if item.chats != 1 else ''}\n{said}"
        if role == Qt.ItemDataRole.AccessibleDescriptionRole:
            return f"project, {item.chats} chat{'s' if item.chats != 1 else ''}"
        if role == ProjectRoles.ID:
            return item.project.id
        if role == ProjectRoles.NAME:
            return item.project.name
        return None

    def reset_to(self, items: list[ListedProject]) -> None:
        self.beginResetModel()
        self._items = list(items)
        self.endResetModel()

    def row_of(self, project_id: int | None) -> int:
        """The row of a project (0, All chats, for None or one not listed)."""
        return next((row + 1 for row, item in enumerate(self._items) if item.project.id == project_id), 0)

    def project(self, project_id: int) -> Project | None:
        return next((item.project for item in self._items if item.project.id == project_id), None)


class ProjectsPanel(QWidget):
    """The "Projects" heading with New project, and the list. Choosing a row emits projectChosen(id or None);
    its menu (and the heading's button) emit newProjectRequested(), newChatRequested(id), editRequested(id),
    exportRequested(id), removeRequested(id). `actions` are enabled for a project's row only."""

    projectChosen = Signal(object)
    newProjectRequested = Signal()
    newChatRequested = Signal(int)
    editRequested = Signal(int)
    exportRequested = Signal(int)
    removeRequested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("projectsPanel")
        self.model = ProjectListModel(self)
        heading = QLabel("Projects", self)
        heading.setObjectName("projectsHeading")
        font = heading.font()
        font.setBold(True)
        heading.setFont(font)
        self.new_button = QToolButton(self)
        self.new_button.setObjectName("newProject")
        self.new_button.setToolTip("New project…")
        self.new_button.setAccessibleName("New project")
        icons.themed(self.new_button, "new-folder")
        self.list = QListView(self)
        self.list.setObjectName("projects")
        self.list.setAccessibleName("Projects")
        self.list.setModel(self.model)
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.list.setFrameShape(QListView.Shape.NoFrame)
        self.list.viewport().setBackgroundRole(QPalette.ColorRole.Window)  # as the chat list below it
        self.list.setStyleSheet("QListView#projects::item{padding:3px 6px;}")  # rows as roomy as the chats'
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.actions_by_name = self._build_actions()
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(heading, 1)
        row.addWidget(self.new_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(row)
        layout.addWidget(self.list)
        self.new_button.clicked.connect(self.newProjectRequested)
        self.list.clicked.connect(self._chosen)
        self.list.activated.connect(self._chosen)
        self.model.modelReset.connect(self._fit)
        self.list.selectionModel().currentChanged.connect(lambda *_: self._enable())
        self._fit()

    def _build_actions(self) -> dict[str, QAction]:
        made: dict[str, QAction] = {}
        for name, words, signal, icon in (("new_chat", "New chat in project", self.newChatRequested, "new-chat"),
                                          ("edit", "Edit project…", self.editRequested, "edit"),
                                          ("export", "Export project…", self.exportRequested, "export"),
                                          ("remove", "Remove project…", self.removeRequested, "delete")):
            action = QAction(words, self.list)
            action.setObjectName(f"project_{name}")
            icons.themed(action, icon)
            action.triggered.connect(lambda _=False, emit=signal.emit: self._with_current(emit))
            self.list.addAction(action)
            made[name] = action
        self._enable()
        return made

    # --- what the host calls -----------------------------------------------------------

    def choose(self, project_id: int | None) -> None:
        """Show this project (None: All chats) as chosen, without projectChosen."""
        self.list.setCurrentIndex(self.model.index(self.model.row_of(project_id)))

    @property
    def chosen_id(self) -> int | None:
        value = self.list.currentIndex().data(ProjectRoles.ID)
        return None if value is None else int(value)

    # --- reacting --------------------------------------------------------------------

    def _chosen(self, index: QModelIndex) -> None:
        value = index.data(ProjectRoles.ID)
        self.projectChosen.emit(None if value is None else int(value))

    def _with_current(self, emit: object) -> None:
        project_id = self.chosen_id
        if project_id is not None and callable(emit):
            emit(project_id)

    def _enable(self) -> None:
        on = self.list.currentIndex().data(ProjectRoles.ID) is not None
        for action in getattr(self, "actions_by_name", {}).values():
            action.setEnabled(on)

    def _fit(self) -> None:
        """As tall as its rows, up to SHOWN_ROWS: the chat list keeps the rest of the sidebar."""
        rows = min(self.model.rowCount(), SHOWN_ROWS)
        row = self.list.sizeHintForRow(0) if self.model.rowCount() else self.list.fontMetrics().height() + 6
        self.list.setFixedHeight(row * rows + 2 * self.list.frameWidth() + 2)
        self._enable()
