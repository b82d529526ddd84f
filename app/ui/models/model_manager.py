"""The model manager window: installed models and the catalog as cards, details and settings beside them; downloads."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QShowEvent, QTextOption
from PySide6.QtWidgets import (QCheckBox, QDialog, QFileDialog, QFrame, QGroupBox, QHBoxLayout, QLabel, QLineEdit,
                               QMessageBox, QPushButton, QScrollArea, QSplitter, QTabWidget, QTextBrowser, QVBoxLayout,
                               QWidget)

from app.core.units import human_size
from app.library.model_defaults import ModelDefaults
from app.service.events import CatalogRow, ModelRow
from app.ui.models.downloads_view import DownloadsPage
from app.ui.models.hub_search import HubSearchBox
from app.ui.models.link_lookup import LinkLookup
from app.ui.models.manager_cards import CardList
from app.ui.models.manager_details import catalog_html, details_html
from app.ui.models.model_card import ModelCard
from app.ui.models.model_card_facts import catalog_facts, installed_facts
from app.ui.state.model_items import CatalogModel, ModelFilter, Roles
from app.ui.models.model_settings_form import ModelSettingsForm
from app.ui.models.server_models import ServerModelsPanel
from app.ui.models.speech_page import SpeechPage

if TYPE_CHECKING:
    from app.service.doors.models import LibraryDoor, ModelDoor
    from app.service.doors.servers import ServersDoor
    from app.service.doors.settings import SettingsDoor
    from app.ui.state.adapter import ServiceAdapter

# The smallest the window gets: two cards' worth of list beside a readable side panel.
MINIMUM_SIZE = (900, 560)


def _search(parent: QWidget, placeholder: str) -> QLineEdit:
    search = QLineEdit(parent)
    search.setPlaceholderText(placeholder)
    search.setClearButtonEnabled(True)
    search.setAccessibleName(placeholder)
    return search


def _browser(parent: QWidget, name: str) -> QTextBrowser:
    browser = QTextBrowser(parent)
    browser.setObjectName(name)
    browser.setFrameShape(QFrame.Shape.NoFrame)
    # Long paths break anywhere rather than widen the pane.
    browser.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    return browser


def _splitter(parent: QWidget, left: QWidget, right: QWidget) -> QSplitter:
    splitter = QSplitter(parent)
    splitter.setChildrenCollapsible(False)
    splitter.addWidget(left)
    splitter.addWidget(right)
    splitter.setStretchFactor(0, 3)
    splitter.setStretchFactor(1, 2)
    splitter.setSizes([700, 480])
    return splitter


class InstalledPage(QWidget):
    """The library as cards (Load on each), the selected model's details and own settings beside them;
    under the cards the models on the servers the person added (`servers_panel`, with servers: the
    ServersDoor). model: the ModelDoor, whose hardware report says whether this build has a GPU
    backend (without it the GPU rows stay as they are)."""

    def __init__(self, adapter: ServiceAdapter, library: LibraryDoor, settings: SettingsDoor,
                 parent: QWidget | None = None, *, model: ModelDoor | None = None,
                 servers: ServersDoor | None = None) -> None:
        super().__init__(parent)
        self.adapter = adapter
        self.library = library
        self._settings = settings
        self._shown: tuple[str, Any] | None = None  # (model id, defaults) the form shows
        self.search = _search(self, "Search your models")
        self.add_file_button = QPushButton("Add a &file…", self)
        self.add_folder_button = QPushButton("Add a fol&der…", self)
        self.filter = ModelFilter(self)
        self.filter.setSourceModel(adapter.installed)
        self.view = CardList(self.filter, self._new_card, lambda card, row: card.show_facts(installed_facts(row)),
                             "No models match. Clear the search, or add a model file.", self)
        self.view.setObjectName("installed")
        self.view.setAccessibleName("Installed models")
        self.total = QLabel(self)
        self.total.setWordWrap(True)
        self.selected_title = QLabel(self)
        self.selected_title.setWordWrap(True)
        bold = self.selected_title.font()
        bold.setBold(True)
        bold.setPointSizeF(bold.pointSizeF() * 1.15)
        self.selected_title.setFont(bold)
        self.default_button = QPushButton("Set as defa&ult", self)
        self.remove_button = QPushButton("&Remove…", self)
        self.details = _browser(self, "modelDetails")
        self.form = ModelSettingsForm(self)
        self.servers_panel = ServerModelsPanel(servers, adapter.spawn, self, model=model) if servers else None
        self._lay_out()
        self.search.textChanged.connect(self.filter.set_text)
        self.view.currentChanged.connect(lambda _key: self.show_selected())
        for signal in (adapter.installed.dataChanged, adapter.installed.rowsRemoved, adapter.installed.totalsChanged):
            signal.connect(lambda *_: self.show_selected())
        adapter.installed.totalsChanged.connect(self._show_total)
        adapter.installed.totalsChanged.connect(self._select_one)
        self.add_file_button.clicked.connect(self.add_file)
        self.add_folder_button.clicked.connect(self.add_folder)
        self.default_button.clicked.connect(lambda: self._act(self.library.set_default))
        self.remove_button.clicked.connect(self.remove)
        self.form.saveRequested.connect(self._save_defaults)
        if model is not None:
            adapter.spawn(self.form.follow_gpu_backend(model))  # the engine's report: off the UI thread
        self._show_total()
        self._select_one()
        self.show_selected()

    def _select_one(self) -> None:
        """With models listed and none selected, select the loaded one (else the default, else the first),
        so that the tab never opens on empty details."""
        if self.view.current_row() is not None or not self.filter.rowCount():
            return
        rows = [self.filter.index(i, 0).data(Roles.ROW) for i in range(self.filter.rowCount())]
        for wanted in (lambda r: r.is_loaded, lambda r: r.is_default, lambda r: True):
            position = next((i for i, r in enumerate(rows) if wanted(r)), None)
            if position is not None:
                self.view.select(position)
                return

    def _new_card(self, parent: QWidget) -> ModelCard:
        card = ModelCard(parent)
        card.actionRequested.connect(lambda model_id: self.adapter.spawn(self.library.load(model_id)))
        return card

    def _lay_out(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.add_file_button)
        top.addWidget(self.add_folder_button)
        left = QWidget(self)
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.view, 3)
        left_layout.addWidget(self.total)
        if self.servers_panel is not None:
            left_layout.addWidget(self.servers_panel, 2)
        buttons = QHBoxLayout()
        buttons.addWidget(self.default_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        settings = QWidget(self)
        settings_layout = QVBoxLayout(settings)
        heading = QLabel("This model's own settings. A chat's own settings go over these; where “as in "
                         "Settings” is ticked, the value in File → Settings… is used.", settings)
        heading.setWordWrap(True)
        settings_layout.addWidget(heading)
        settings_layout.addWidget(self.form)
        settings_layout.addStretch(1)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(settings)
        # As wide as the form needs, so no setting is cut: the cards beside it give way instead.
        scroll.setMinimumWidth(settings.minimumSizeHint().width() + scroll.verticalScrollBar().sizeHint().width())
        self.pane_tabs = QTabWidget(self)
        self.pane_tabs.addTab(self.details, "De&tails")
        self.pane_tabs.addTab(scroll, "&Settings")
        self.pane = QWidget(self)
        pane_layout = QVBoxLayout(self.pane)
        pane_layout.setContentsMargins(0, 0, 0, 0)
        pane_layout.addWidget(self.selected_title)
        pane_layout.addLayout(buttons)
        pane_layout.addWidget(self.pane_tabs, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(_splitter(self, left, self.pane), 1)

    def _show_total(self) -> None:
        model = self.adapter.installed
        text = f"Kestrel's models folder: {human_size(model.disk_total)}"
        if model.referenced_total():
            text += f" · models kept where you keep them: {human_size(model.referenced_total())}"
        self.total.setText(text)

    def selected(self) -> ModelRow | None:
        row = self.view.current_row()
        return row if isinstance(row, ModelRow) else None

    def show_selected(self) -> None:
        """Show the selected model's details and settings (an empty pane without one)."""
        row = self.selected()
        self.pane.setEnabled(row is not None)
        if row is None:
            self.selected_title.setText("No model chosen")
            self.details.setText("Choose a model's card to see its details and settings.")
            self._shown = None
            self.default_button.setEnabled(False)
            self.remove_button.setEnabled(False)
            return
        model = row.model
        self.selected_title.setText(model.title)
        self.details.setText(details_html(row))
        self.default_button.setEnabled(not model.missing and not row.is_default)
        self.remove_button.setEnabled(True)
        self.remove_button.setText("Fo&rget…" if model.referenced else "&Remove…")
        if self._shown != (model.id, model.defaults):
            # Only when another model is chosen or its saved settings changed: edits in
            # progress survive a fresh listing.
            self._shown = (model.id, model.defaults)
            settings = self._settings.settings
            self.form.show_defaults(model.defaults, settings.generation, settings.device_preference)

    def _act(self, method: Callable[[str], Coroutine[Any, Any, bool]]) -> None:
        row = self.selected()
        if row is not None:
            self.adapter.spawn(method(row.model.id))

    def _save_defaults(self, defaults: ModelDefaults) -> None:
        row = self.selected()
        if row is not None:
            self.adapter.spawn(self.library.set_defaults(row.model.id, defaults))

    def remove(self) -> None:
        row = self.selected()
        if row is None:
            return
        model = row.model
        if model.referenced:
            question = (f"Forget “{model.title}”? Kestrel stops listing it; the file stays where it is:\n"
                        f"{model.path}")
        else:
            question = (f"Remove “{model.title}”? Its file ({human_size(model.size)}) is deleted from "
                        "Kestrel's models folder. This cannot be undone.")
        if self.confirm(question):
            self.adapter.spawn(self.library.remove(model.id))

    def add_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Add a model file", "", "GGUF models (*.gguf);;All files (*)")
        if not path:
            return
        reference = self.ask_reference(path)
        if reference is not None:
            self.adapter.spawn(self.library.add(path, reference=reference))

    def add_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Add the models in a folder (they stay where they are)")
        if path:
            self.adapter.spawn(self.library.add_folder(path))

    def ask_reference(self, path: str) -> bool | None:
        """Copy the file into Kestrel's folder (False), use it where it is (True), or cancel (None)."""
        box = QMessageBox(QMessageBox.Icon.Question, "Add a model file",
                          f"Copy {path} into Kestrel's models folder, or use it where it is?\n"
                          "A file used where it is stays yours: removing it from Kestrel only forgets it.", parent=self)
        copy = box.addButton("&Copy it in", QMessageBox.ButtonRole.AcceptRole)
        keep = box.addButton("&Use it where it is", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        clicked = box.clickedButton()
        return True if clicked is keep else False if clicked is copy else None

    def confirm(self, question: str) -> bool:
        return QMessageBox.question(self, "Kestrel", question) == QMessageBox.StandardButton.Yes


class CatalogPage(QWidget):
    """The catalog as cards (Download on each, Load once installed), filtered to what fits unless asked
    otherwise; beside them the chosen model's details, and any other model by its repository or link.

    Signals: downloadStarted (switch to the downloads page).
    """

    downloadStarted = Signal()

    def __init__(self, adapter: ServiceAdapter, library: LibraryDoor, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.adapter = adapter
        self.library = library
        self.search = _search(self, "Search the catalog")
        self.fits_only = QCheckBox("&Only models that fit this machine", self)
        self.runs_well_only = QCheckBox("Only models that run &well here", self)
        self.runs_well_only.setToolTip("Models predicted to write on this machine at least as fast as "
                                       "“A comfortable reading speed” in File → Settings… (10 tokens/s unless "
                                       "you changed it).")
        self.filter = ModelFilter(self)
        self.filter.setSourceModel(adapter.catalog)
        # Best first: what runs well here, then usable, slow and what will not fit (faster first within each).
        self.filter.sort(CatalogModel.FITS)
        self.view = CardList(self.filter, self._new_card, self._fill,
                             "No model of the catalog matches. Clear the search, or untick “Only models that fit”.",
                             self)
        self.view.setObjectName("catalog")
        self.view.setAccessibleName("Catalog")
        self.about = _browser(self, "catalogDetails")
        self.link = LinkLookup(adapter, library, self)
        self.hub_search = HubSearchBox(adapter, library, self)
        self._lay_out()
        self.search.textChanged.connect(self.filter.set_text)
        self.fits_only.toggled.connect(self.filter.set_fits_only)
        self.fits_only.setChecked(True)
        self.runs_well_only.toggled.connect(self.filter.set_runs_well_only)
        self.view.currentChanged.connect(lambda _key: self.show_selected())
        adapter.catalog.dataChanged.connect(lambda *_: self.show_selected())
        installed = adapter.installed
        for signal in (installed.dataChanged, installed.rowsInserted, installed.rowsRemoved):
            signal.connect(lambda *_: self.view.refill())  # Load or Loaded follows the library
        self.link.downloadStarted.connect(self.downloadStarted)
        self.hub_search.downloadStarted.connect(self.downloadStarted)
        self.show_selected()

    def _lay_out(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.fits_only)
        top.addWidget(self.runs_well_only)
        other = QGroupBox("Another model: from a Hugging Face repository or a link", self)
        QVBoxLayout(other).addWidget(self.link)
        side = QWidget(self)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(0, 0, 0, 0)
        self.side_tabs = QTabWidget(side)
        self.side_tabs.addTab(self.about, "About this mod&el")
        self.side_tabs.addTab(self.hub_search, "Search &Hugging Face")
        side_layout.addWidget(self.side_tabs, 1)
        side_layout.addWidget(other)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(_splitter(self, self.view, side), 1)

    def _new_card(self, parent: QWidget) -> ModelCard:
        card = ModelCard(parent)
        card.actionRequested.connect(lambda _target, card=card: self.act(card.facts.key if card.facts else ""))
        return card

    def _fill(self, card: ModelCard, row: CatalogRow) -> None:
        pick = self.library.recommended()
        card.show_facts(catalog_facts(row, self._is_loaded(row.installed_id),
                                      pick.reason if pick is not None and pick.entry.id == row.entry.id else ""))

    def _is_loaded(self, model_id: str | None) -> bool:
        return model_id is not None and any(row.model.id == model_id and row.is_loaded
                                            for row in self.adapter.installed.rows())

    def show_selected(self) -> None:
        row = self.view.current_row()
        if isinstance(row, CatalogRow):
            self.about.setText(catalog_html(row))
        else:
            self.about.setText("Choose a model's card to see what it is and whether it fits this machine. "
                               "Downloads, searching Hugging Face and looking up what you paste below are "
                               "the only times Kestrel uses the network.")

    def act(self, catalog_id: str) -> None:
        """A card's button: download the entry, or load the model it became."""
        number = self.adapter.catalog.row_of(catalog_id)
        if number is None:
            return
        row = self.adapter.catalog.rows()[number]
        library = self.library
        if row.installed_id is not None:
            self.adapter.spawn(library.load(row.installed_id))
            return
        library.download(row.entry)
        self.downloadStarted.emit()


class ModelManager(QDialog):
    """Not modal: the chat goes on while it is open. Opening it asks for a fresh listing (and, with
    servers, the ServersDoor, each server the person added for its models). model (the ModelDoor): for
    whether this build has a GPU backend (the Settings tab greys GPU layers without)."""

    def __init__(self, adapter: ServiceAdapter, library: LibraryDoor, settings: SettingsDoor,
                 parent: QWidget | None = None, *, model: ModelDoor | None = None,
                 servers: ServersDoor | None = None) -> None:
        super().__init__(parent)
        self.adapter = adapter
        self.library = library
        self.setWindowTitle("Models")
        self.setModal(False)
        self.setMinimumSize(*MINIMUM_SIZE)
        self.resize(1220, 720)
        self.tabs = QTabWidget(self)
        self.installed = InstalledPage(adapter, library, settings, self.tabs, model=model, servers=servers)
        self.catalog = CatalogPage(adapter, library, self.tabs)
        self.speech = SpeechPage(adapter, library, self.tabs)
        self.downloads = DownloadsPage(adapter, library, self.tabs)
        self.tabs.addTab(self.installed, "&Installed")
        self.tabs.addTab(self.catalog, "&Get a model")
        self.tabs.addTab(self.speech, "S&peech")
        self.tabs.addTab(self.downloads, "Do&wnloads")
        for page in (self.catalog, self.speech):
            page.downloadStarted.connect(lambda: self.tabs.setCurrentWidget(self.downloads))
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)

    def showEvent(self, event: QShowEvent) -> None:  # Override QDialog.showEvent.
        super().showEvent(event)
        self.adapter.spawn(self.library.refresh())
        self.speech.refresh()
        if self.installed.servers_panel is not None:
            self.installed.servers_panel.refresh()
