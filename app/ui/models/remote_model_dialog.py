"""A server's model's "Settings…": its context length and abilities set by hand where the server does not say them."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (QCheckBox, QDialog, QGridLayout, QHBoxLayout, QLabel, QPushButton, QSpinBox,
                               QVBoxLayout, QWidget)

from app.library.servers.records import MAX_SET_CONTEXT, MIN_SET_CONTEXT, ModelAbility, ModelOverride, RemoteModel
from app.library.servers.server_list import ServerListError
from app.ui.common.text_room import fit_title
from app.ui.models.server_dialog import Spawn

if TYPE_CHECKING:
    from app.service.doors.servers import ServersDoor

# The abilities offered, in the order shown, with what the person reads.
ABILITY_WORDS: tuple[tuple[ModelAbility, str], ...] = (
    (ModelAbility.VISION, "&Takes images (vision)"),
    (ModelAbility.TOOLS, "Calls t&ools"),
    (ModelAbility.EMBEDDINGS, "Makes &embeddings only (does not chat)"),
)
CONTEXT_STEP = 256
GUESSED_CONTEXT = 8192  # where the box starts when neither the server nor the person said a length


def said_context_words(model: RemoteModel) -> str:
    said = model.as_said.context_length
    return f"Its server says {said:,} tokens." if said else "Its server does not say its context length."


def said_abilities_words(model: RemoteModel) -> str:
    said = model.as_said
    if not said.abilities_known:
        sees = " It says the model takes images." if ModelAbility.VISION in said.abilities else ""
        return (f"Its server does not say what the model can do: tools are offered, and the server says if the "
                f"model cannot call them.{sees}")
    return "Its server says: " + (", ".join(sorted(said.abilities)) or "text only") + "."


class RemoteModelDialog(QDialog):
    """One server model's context length and abilities, as its server said them and as the person sets them.

    Starts at what Kestrel uses now (RemoteModel.abilities_in_use). Save keeps, through the ServersDoor off
    the UI thread, only what differs from what the server says (the same as it says is nothing set by hand);
    "As the server says" clears the form back. The model is used so from its next load.
    Signals: saved(RemoteModel as now set).
    """

    saved = Signal(object)

    def __init__(self, servers: ServersDoor, spawn: Spawn, model: RemoteModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("A server's model")  # its name is in the heading, wrapped: ids run long
        self._servers = servers
        self._spawn = spawn
        self.model = model
        self._task: asyncio.Task[Any] | None = None
        self.heading = self._wrapped(f"{model.name} on {model.server}: set here what its server does not say. "
                                     "Kestrel uses it from the next time the model is loaded.", "remoteModelHeading")
        self.context_by_hand = QCheckBox("Set the &context length:", self)
        self.context = QSpinBox(self)
        self.context.setAccessibleName("Context length")
        self.context.setRange(MIN_SET_CONTEXT, MAX_SET_CONTEXT)
        self.context.setSingleStep(CONTEXT_STEP)
        self.context.setGroupSeparatorShown(True)
        self.context.setSuffix(" tokens")
        self.context_said = self._wrapped(said_context_words(model), "remoteContextSaid")
        self.abilities = {ability: QCheckBox(words, self) for ability, words in ABILITY_WORDS}
        self.abilities_said = self._wrapped(said_abilities_words(model), "remoteAbilitiesSaid")
        self.note = self._wrapped("", "remoteModelNote")
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.as_said_button = QPushButton("As the server &says", self)
        self.save_button = QPushButton("Sa&ve", self)
        self.save_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel", self)
        self._lay_out()
        self._show(model.by_hand or ModelOverride())
        self.context_by_hand.toggled.connect(self.context.setEnabled)
        self.as_said_button.clicked.connect(lambda: self._show(ModelOverride()))
        self.save_button.clicked.connect(self.save)
        self.cancel_button.clicked.connect(self.reject)

    def _wrapped(self, text: str, name: str) -> QLabel:
        label = QLabel(text, self)
        label.setObjectName(name)
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.PlainText)
        return label

    def _lay_out(self) -> None:
        context = QHBoxLayout()
        context.addWidget(self.context_by_hand)
        context.addWidget(self.context, 1)
        grid = QGridLayout()
        grid.addLayout(context, 0, 0)
        grid.addWidget(self.context_said, 1, 0)
        grid.setRowMinimumHeight(2, self.fontMetrics().height() // 2)
        for row, (ability, _words) in enumerate(ABILITY_WORDS, start=3):
            grid.addWidget(self.abilities[ability], row, 0)
        grid.addWidget(self.abilities_said, 3 + len(ABILITY_WORDS), 0)
        buttons = QHBoxLayout()
        buttons.addWidget(self.as_said_button)
        buttons.addStretch(1)
        buttons.addWidget(self.save_button)
        buttons.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addLayout(grid)
        layout.addWidget(self.note)
        layout.addStretch(1)
        layout.addLayout(buttons)
        self.setMinimumWidth(self.fontMetrics().horizontalAdvance(ABILITY_WORDS[2][1]) * 2)
        fit_title(self)

    def _show(self, override: ModelOverride) -> None:
        """The form for the model as its server said it with override on it."""
        model = self.model.as_said.with_override(override)
        self.context_by_hand.setChecked(override.context_length is not None)
        self.context.setEnabled(override.context_length is not None)
        self.context.setValue(model.context_length or GUESSED_CONTEXT)
        for ability, box in self.abilities.items():
            box.setChecked(ability in model.abilities_in_use)
        self.note.setText("")

    def chosen(self) -> ModelOverride:
        """What the form sets by hand: a length only when ticked, abilities only where they differ from the
        server's (the same as it says is nothing set by hand, so a server that learns to say more is heard)."""
        abilities = frozenset(ability for ability, box in self.abilities.items() if box.isChecked())
        return ModelOverride(self.context.value() if self.context_by_hand.isChecked() else None,
                             None if abilities == self.model.as_said.abilities_in_use else abilities)

    def save(self) -> None:
        if self._task is not None and not self._task.done():
            return
        self.save_button.setEnabled(False)
        self.note.setText("Saving…")
        self._task = self._spawn(self._save(self.chosen()))

    async def _save(self, override: ModelOverride) -> None:
        try:
            await self._servers.set_override(self.model.server, self.model.name, override)
        except (LookupError, ServerListError, OSError) as refused:
            if shiboken6.isValid(self):
                self.note.setText(f"Nothing was saved: {refused}")
                self.save_button.setEnabled(True)
            return
        if shiboken6.isValid(self):
            self.saved.emit(self.model.as_said.with_override(override))
            self.accept()

    def showEvent(self, event: QShowEvent) -> None:  # Override QDialog.showEvent.
        super().showEvent(event)
        layout = self.layout()
        if layout is not None and layout.hasHeightForWidth():
            self.resize(self.width(), max(self.height(), layout.totalHeightForWidth(self.width())))
