"""The models on the servers the person added, beside the local ones: each marked with its server, usable like a local one."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QMessageBox, QPushButton,
                               QSizePolicy, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from app.core.units import human_size
from app.library.servers.book import ServerAdded
from app.library.servers.faults import ServerFault
from app.library.servers.records import AddedServer, RemoteModel
from app.library.servers.server_list import ServerListError
from app.service.library.remote_servers import AnswersBusy
from app.ui.models.remote_model_dialog import RemoteModelDialog
from app.ui.models.server_dialog import AddServerDialog, Spawn, models_words

if TYPE_CHECKING:
    from app.service.doors.models import ModelDoor
    from app.service.doors.servers import ServersDoor

_ITEM = Qt.ItemDataRole.UserRole + 1  # the AddedServer or RemoteModel a row shows
NONE_ADDED = ("Models on your other computers can answer here too: add a server (Ollama, LM Studio, "
              "llama-server, another Kestrel). Nothing is contacted until you add one.")


def abilities_words(model: RemoteModel) -> str:
    """The "Can also" column: what the server says or the person set (marked), "not said" where neither says."""
    if model.by_hand is not None and model.by_hand.abilities is not None:
        return (", ".join(sorted(model.abilities)) or "text only") + " (set by hand)"
    if not model.abilities_known:  # an OpenAI-compatible server may say vision, and nothing of tools
        return ", ".join(sorted(model.abilities)) + "; tools not said" if model.abilities else "not said"
    return ", ".join(sorted(model.abilities)) or "text only"


def context_words(model: RemoteModel) -> str:
    """The "Context" column, marked where the person set it."""
    if not model.context_length:
        return "not said"
    by_hand = model.by_hand is not None and model.by_hand.context_length is not None
    return f"{model.context_length:,}" + (" (set by hand)" if by_hand else "")


class ServerModelsPanel(QWidget):
    """The servers added (a row each: name, address, kind) and under each the models it lists now.

    Opening the model manager reads the list (no server is contacted) and then asks each added server for
    its models: the person added it to be used. "Use this model" loads one as the model in use, as Load does
    for a local model; "Remove server…" forgets a server and its key. `words` says what the last call did,
    in the server's own words when it failed. Signals: changed (a server was added or removed).
    """

    changed = Signal()

    def __init__(self, servers: ServersDoor, spawn: Spawn, parent: QWidget | None = None, *,
                 model: ModelDoor | None = None) -> None:
        super().__init__(parent)
        self._servers = servers
        self._spawn = spawn
        self._model = model
        self.listing: asyncio.Task[Any] | None = None
        self.dialog: AddServerDialog | None = None
        self.settings_dialog: RemoteModelDialog | None = None
        self.title = QLabel("On your servers", self)
        bold = self.title.font()
        bold.setBold(True)
        self.title.setFont(bold)
        self.add_button = QPushButton("Add a &server…", self)
        self.refresh_button = QPushButton("Ask a&gain", self)
        self.refresh_button.setToolTip("Ask each server you added for the models it has now")
        self.use_button = QPushButton("Use this m&odel", self)
        self.settings_button = QPushButton("Se&ttings…", self)
        self.settings_button.setToolTip("Set the model's context length and abilities where its server does not "
                                        "say them")
        self.remove_button = QPushButton("Remove ser&ver…", self)
        self.tree = QTreeWidget(self)
        self.tree.setObjectName("serverModels")
        self.tree.setAccessibleName("Models on your servers")
        self.tree.setHeaderLabels(["Model", "Context", "Can also"])
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setAlternatingRowColors(True)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)  # the names: the other columns are short
        for column in (1, 2):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.words = QLabel(NONE_ADDED, self)
        self.words.setObjectName("serverWords")
        self.words.setWordWrap(True)
        self.words.setTextFormat(Qt.TextFormat.PlainText)
        self.words.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._lay_out()
        self.add_button.clicked.connect(self.open_add_dialog)
        self.refresh_button.clicked.connect(self.refresh)
        self.use_button.clicked.connect(self.use_selected)
        self.settings_button.clicked.connect(self.open_settings)
        self.remove_button.clicked.connect(self.remove_selected)
        self.tree.itemSelectionChanged.connect(self._selection_changed)
        self.tree.itemDoubleClicked.connect(lambda item, _column: self.use_selected() if self._model_of(item) else None)
        self._show_servers(())

    def _lay_out(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.add_button)
        buttons = QHBoxLayout()
        buttons.addWidget(self.use_button)
        buttons.addWidget(self.settings_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        buttons.addWidget(self.refresh_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.tree, 1)
        layout.addLayout(buttons)
        layout.addWidget(self.words)

    # --- listing --------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the servers added, then ask each for its models (off the UI thread, all at once)."""
        if self.listing is not None and not self.listing.done():
            return
        self.listing = self._spawn(self._list())
        self.refresh_button.setEnabled(False)
        self.listing.add_done_callback(lambda _done: self._listed() if shiboken6.isValid(self) else None)

    def _listed(self) -> None:
        self.refresh_button.setEnabled(self.tree.topLevelItemCount() > 0)

    async def _list(self) -> None:
        servers = await self._servers.servers()
        if not shiboken6.isValid(self):
            return
        self._show_servers(servers)
        if not servers:
            self.words.setText(self._servers.last_problem or NONE_ADDED)
            return
        self.words.setText("Asking " + ", ".join(server.name for server in servers) + " for their models…")
        answers = await asyncio.gather(*(self._servers.models(server.name) for server in servers),
                                       return_exceptions=True)
        if not shiboken6.isValid(self):
            return
        said: list[str] = []
        for server, answer in zip(servers, answers):
            if isinstance(answer, ServerFault):
                said.append(str(answer))
                self._show_models(server, (), str(answer))
            elif isinstance(answer, BaseException):
                raise answer  # a bug, not the server's doing: the event loop logs it
            else:
                self._show_models(server, answer, "")
        self.words.setText(" ".join(said) or "Choose a model, then Use this model: your chats answer with it.")

    def _show_servers(self, servers: tuple[AddedServer, ...]) -> None:
        self.tree.clear()
        for server in servers:
            item = QTreeWidgetItem([f"{server.name} · {server.url} · {server.kind.described}"])
            item.setData(0, _ITEM, server)
            bold = item.font(0)
            bold.setBold(True)
            item.setFont(0, bold)
            item.setToolTip(0, f"{server.name}: {server.kind.described} at {server.url}")
            self.tree.addTopLevelItem(item)
            item.setFirstColumnSpanned(True)  # only once in the tree: Qt ignores it before
            QTreeWidgetItem(item, ["asking…"]).setDisabled(True)
            item.setExpanded(True)
        self.tree.setVisible(bool(servers))
        # Without servers the panel is a line and a button: the cards above keep the room.
        self.setSizePolicy(QSizePolicy.Policy.Preferred,
                           QSizePolicy.Policy.Expanding if servers else QSizePolicy.Policy.Maximum)
        self.refresh_button.setVisible(bool(servers))
        self.use_button.setVisible(bool(servers))
        self.settings_button.setVisible(bool(servers))
        self.remove_button.setVisible(bool(servers))
        self._selection_changed()

    def _show_models(self, server: AddedServer, models: tuple[RemoteModel, ...], problem: str) -> None:
        top = self.server_item(server.name)
        if top is None:
            return
        top.takeChildren()
        if problem:
            failed = QTreeWidgetItem(top, ["did not answer (choose the server to read why)"])
            failed.setDisabled(True)
            top.setToolTip(0, problem)
            top.setData(1, _ITEM, problem)
        elif not models:
            QTreeWidgetItem(top, ["lists no models"]).setDisabled(True)
        in_use = self._model.model.address if self._model is not None and self._model.model is not None else None
        for model in models:
            self._fill_row(QTreeWidgetItem(top), model, server, in_use)
        top.setExpanded(True)

    def _fill_row(self, child: QTreeWidgetItem, model: RemoteModel, server: AddedServer, in_use: str | None) -> None:
        child.setText(0, f"{model.name} (in use)" if model.address == in_use else model.name)
        child.setText(1, context_words(model))
        child.setText(2, abilities_words(model))
        child.setData(0, _ITEM, model)
        child.setToolTip(0, f"{model.id}: {model.name} on {server.name}"
                            + (f", {human_size(model.size)}" if model.size > 1 else ""))
        if model.by_hand is not None:
            said = model.as_said
            child.setToolTip(2, "Set by hand; its server says " + (
                (", ".join(sorted(said.abilities)) or "text only") if said.abilities_known else "nothing of it")
                + (f" and {said.context_length:,} tokens." if said.context_length else "."))

    def server_item(self, name: str) -> QTreeWidgetItem | None:
        for row in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(row)
            if item is not None and item.data(0, _ITEM).name == name:
                return item
        return None

    def models_of(self, name: str) -> list[RemoteModel]:
        """The models shown under a server (empty while it is asked, or when it did not answer)."""
        item = self.server_item(name)
        children = [item.child(i) for i in range(item.childCount())] if item is not None else []
        return [found for child in children if child is not None and (found := self._model_of(child))]

    # --- choosing ----------------------------------------------------------------------------

    @staticmethod
    def _model_of(item: QTreeWidgetItem | None) -> RemoteModel | None:
        data = item.data(0, _ITEM) if item is not None else None
        return data if isinstance(data, RemoteModel) else None

    def _selected(self) -> QTreeWidgetItem | None:
        items = self.tree.selectedItems()
        return items[0] if items else None

    def selected_server(self) -> AddedServer | None:
        item = self._selected()
        while item is not None and item.parent() is not None:
            item = item.parent()
        data = item.data(0, _ITEM) if item is not None else None
        return data if isinstance(data, AddedServer) else None

    def select_model(self, model_id: str) -> None:
        """Select a listed model by its id (SERVER/MODEL), as a click does."""
        for row in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(row)
            for i in range(top.childCount() if top is not None else 0):
                child = top.child(i) if top is not None else None
                found = self._model_of(child)
                if child is not None and found is not None and found.id == model_id:
                    self.tree.setCurrentItem(child)

    def _selection_changed(self) -> None:
        item = self._selected()
        self.use_button.setEnabled(self._model_of(item) is not None)
        self.settings_button.setEnabled(self._model_of(item) is not None)
        self.remove_button.setEnabled(self.selected_server() is not None)
        server = self.selected_server()
        if server is not None:
            top = self.server_item(server.name)
            problem = top.data(1, _ITEM) if top is not None else None
            if problem:
                self.words.setText(str(problem))

    def use_selected(self) -> None:
        model = self._model_of(self._selected())
        if model is not None:
            self.words.setText(f"Loading {model.name} on {model.server}…")
            self._spawn(self._use(model))

    async def _use(self, model: RemoteModel) -> None:
        try:
            loaded = await self._servers.load(model)
        except (ServerFault, AnswersBusy) as refused:
            loaded, why = False, str(refused)
        else:
            why = self._model.model_detail if self._model is not None and not loaded else ""
        if not shiboken6.isValid(self):
            return
        if loaded:
            self.words.setText(f"Your chats answer with {model.name} on {model.server} now; what you send them "
                               "goes to that server.")
            self.refresh()  # marks it in use
        else:
            self.words.setText(why or f"{model.name} on {model.server} could not be loaded: the status bar says why.")

    def open_settings(self) -> RemoteModelDialog | None:
        """Open the selected model's Settings… (not modal); None when no model is selected."""
        model = self._model_of(self._selected())
        if model is None:
            return None
        if self.settings_dialog is not None and shiboken6.isValid(self.settings_dialog):
            self.settings_dialog.close()
        dialog = self.settings_dialog = RemoteModelDialog(self._servers, self._spawn, model, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.saved.connect(self._settings_saved)
        dialog.show()
        return dialog

    def _settings_saved(self, model: RemoteModel) -> None:
        """The row shows what was set at once; the server is not asked again for it."""
        top = self.server_item(model.server)
        server = top.data(0, _ITEM) if top is not None else None
        for i in range(top.childCount() if top is not None else 0):
            child = top.child(i) if top is not None else None
            shown = self._model_of(child)
            if child is not None and isinstance(server, AddedServer) and shown is not None and shown.id == model.id:
                in_use = self._model.model.address if self._model is not None and self._model.model else None
                self._fill_row(child, model, server, in_use)
        self.words.setText(f"Saved for {model.name} on {model.server}: Kestrel uses it from the next time the model "
                           "is loaded (Use this model loads it again).")

    def remove_selected(self) -> None:
        server = self.selected_server()
        if server is None:
            return
        question = (f"Remove {server.name} ({server.url})? Kestrel forgets its address and key; its models stay "
                    "on that computer.")
        if QMessageBox.question(self, "Remove a server", question) == QMessageBox.StandardButton.Yes:
            self._spawn(self._remove(server.name))

    async def _remove(self, name: str) -> None:
        try:
            await self._servers.remove(name)
        except (ServerListError, OSError) as refused:
            if shiboken6.isValid(self):
                self.words.setText(f"{name} was not removed: {refused}")
            return
        if shiboken6.isValid(self):
            self.changed.emit()
            self.refresh()

    # --- adding ---------------------------------------------------------------------------------

    def open_add_dialog(self) -> AddServerDialog:
        """Open "Add a server" (not modal: the window goes on); it is the one open if it is already."""
        if self.dialog is None or not shiboken6.isValid(self.dialog):
            self.dialog = AddServerDialog(self._servers, self._spawn, self)
            self.dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            self.dialog.serverAdded.connect(self._added)
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    def _added(self, added: ServerAdded, models: tuple[RemoteModel, ...] | None) -> None:
        name = added.server.name
        said = models_words(name, models) if models is not None else f"{name} is added; it did not answer yet."
        kept = f" {added.key.words}" if added.key is not None else ""
        self.dialog = None
        self.changed.emit()
        self.refresh()
        self._after_listing(f"Added {name}. {said}{kept}")

    def _after_listing(self, text: str) -> None:
        """Say text once the listing under way has spoken (it would overwrite it)."""
        task = self.listing
        if task is None or task.done():
            self.words.setText(text)
        else:
            task.add_done_callback(lambda _done: self.words.setText(text) if shiboken6.isValid(self) else None)
