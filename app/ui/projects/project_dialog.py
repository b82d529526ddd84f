"""ProjectDialog: a project's name, instructions, model, tools, collections and memory choice, to make or change it."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit,
                               QListWidget, QListWidgetItem, QPlainTextEdit, QVBoxLayout, QWidget)

from app.core.projects import MAX_INSTRUCTIONS, MAX_PROJECT_NAME, Project

INSTRUCTIONS_HINT = "For example: Always answer in French. Keep answers short."
EDIT_NOTE = "A change shapes the project's new chats; its chats keep what they started with."
NO_TOOLS = "No tool servers yet: add one in Settings → Tools."
NO_COLLECTIONS = "No collections yet: add a folder in Documents."


@dataclass(frozen=True)
class ProjectChoices:
    """What the form offers: the installed models (id, name), the MCP servers' names and the collections' names."""

    models: tuple[tuple[str, str], ...] = ()
    tools: tuple[str, ...] = ()
    collections: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProjectForm:
    """The form as filled in (model None: the default model)."""

    name: str
    instructions: str
    model: str | None
    tools: tuple[str, ...]
    collections: tuple[str, ...]
    memory: bool


class ProjectDialog(QDialog):
    """New project, or Edit project when given one. Save emits saveRequested(form) and waits: the host keeps
    it with `accept()` or says why not with `refuse(words)` (the dialog stays open, as typed)."""

    saveRequested = Signal(object)

    def __init__(self, choices: ProjectChoices, project: Project | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("projectDialog")
        self.setWindowTitle("Edit project" if project is not None else "New project")
        self.name = QLineEdit(self)
        self.name.setMaxLength(MAX_PROJECT_NAME)
        self.name.setPlaceholderText("Garden, Thesis, Trip to Lisbon…")
        self.name.setAccessibleName("Project name")
        self.instructions = QPlainTextEdit(self)
        self.instructions.setPlaceholderText(INSTRUCTIONS_HINT)
        self.instructions.setAccessibleName("Instructions")
        self.instructions.setTabChangesFocus(True)
        self.count = QLabel(self)
        self.count.setObjectName("instructionsCount")
        self.model = self._models(choices, project)
        self.tools = self._checks(choices.tools, project.tools if project else (), "Tools", NO_TOOLS)
        self.collections = self._checks(choices.collections, project.collections if project else (), "Collections",
                                        NO_COLLECTIONS)
        self.memory = QCheckBox("Use my memories in this project's chats", self)
        self.memory.setChecked(project.memory if project is not None else True)
        self.refusal = QLabel(self)
        self.refusal.setObjectName("projectRefusal")
        self.refusal.setWordWrap(True)
        self.refusal.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.refusal.hide()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel,
                                        self)
        self.save = self.buttons.button(QDialogButtonBox.StandardButton.Save)
        self._lay_out(project is not None)
        if project is not None:
            self.name.setText(project.name)
            self.instructions.setPlainText(project.instructions)
        self.name.textChanged.connect(self._update)
        self.instructions.textChanged.connect(self._update)
        self.buttons.accepted.connect(lambda: self.saveRequested.emit(self.form()))
        self.buttons.rejected.connect(self.reject)
        self._update()

    def _lay_out(self, editing: bool) -> None:
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Name", self.name)
        form.addRow("Instructions", self.instructions)
        form.addRow("", self.count)
        form.addRow("Model", self.model)
        form.addRow("Tools", self.tools)
        form.addRow("Collections", self.collections)
        form.addRow("", self.memory)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        if editing:
            note = QLabel(EDIT_NOTE, self)
            note.setObjectName("projectEditNote")
            note.setWordWrap(True)
            layout.addWidget(note)
        layout.addWidget(self.refusal)
        layout.addWidget(self.buttons)
        self.setMinimumWidth(self.fontMetrics().horizontalAdvance("x") * 60)

    def _models(self, choices: ProjectChoices, project: Project | None) -> QComboBox:
        box = QComboBox(self)
        box.setAccessibleName("Model")
        box.addItem("The default model", None)
        for model_id, label in choices.models:
            box.addItem(label, model_id)
        wanted = project.model if project is not None else None
        if wanted is not None and box.findData(wanted) < 0:
            box.addItem(f"{wanted} (not installed now)", wanted)  # kept as chosen, said as it is
        box.setCurrentIndex(max(box.findData(wanted), 0))
        return box

    def _checks(self, names: tuple[str, ...], chosen: tuple[str, ...], what: str, empty: str) -> QListWidget:
        box = QListWidget(self)
        box.setAccessibleName(what)
        for name in dict.fromkeys((*names, *chosen)):  # one chosen that is gone now stays, ticked
            item = QListWidgetItem(name if name in names else f"{name} (not found now)", box)
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if name in chosen else Qt.CheckState.Unchecked)
        if box.count() == 0:
            placeholder = QListWidgetItem(empty, box)
            placeholder.setFlags(Qt.ItemFlag.NoItemFlags)
        rows = min(max(box.count(), 1), 4)
        box.setFixedHeight(box.sizeHintForRow(0) * rows + 2 * box.frameWidth() + 4)
        return box

    # --- what the host calls ---------------------------------------------------------

    def form(self) -> ProjectForm:
        return ProjectForm(self.name.text(), self.instructions.toPlainText(), self.model.currentData(),
                           _checked(self.tools), _checked(self.collections), self.memory.isChecked())

    def refuse(self, words: str) -> None:
        """Say why the project was not kept; the form stays as typed."""
        self.refusal.setText(words)
        self.refusal.show()
        self.save.setEnabled(True)

    def _update(self) -> None:
        length = len(self.instructions.toPlainText())
        over = length > MAX_INSTRUCTIONS
        self.count.setText(f"{length:,} of {MAX_INSTRUCTIONS:,} characters" + (": too long, shorten them" if over
                                                                                else ""))
        self.save.setEnabled(bool(self.name.text().strip()) and not over)
        self.refusal.hide()


def _checked(box: QListWidget) -> tuple[str, ...]:
    items = (box.item(row) for row in range(box.count()))
    return tuple(str(item.data(Qt.ItemDataRole.UserRole)) for item in items
                 if item.checkState() == Qt.CheckState.Checked and item.data(Qt.ItemDataRole.UserRole))
