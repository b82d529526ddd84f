"""The model manager window: installed models with details, fit and settings; the catalog; downloads."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QMouseEvent, QShowEvent, QTextOption
from PySide6.QtWidgets import (QCheckBox, QDialog, QFileDialog, QFrame, QGroupBox, QHBoxLayout, QLabel, QLineEdit,
                               QMessageBox, QPushButton, QScrollArea, QSplitter, QTabWidget, QTextBrowser, QVBoxLayout,
                               QWidget)

from app.core.units import human_size
from app.library.model_defaults import ModelDefaults
from app.ui.downloads_view import DownloadsPage
from app.ui.fit_verdict import verdict_tooltip
from app.ui.link_lookup import LinkLookup
from app.ui.model_items import ModelFilter, selected_row, table
from app.ui.model_settings_form import ModelSettingsForm

if TYPE_CHECKING:
    from app.ui.adapter import ControllerAdapter

# Details of a model's files, in the order shown, with their labels.
_DETAILS = (("format", "Format"), ("architecture", "Architecture"), ("parameters_label", "Parameters"),
            ("quantization", "Quantization"), ("file_size", "File size"), ("layers", "Layers"),
            ("context_length", "Native context"), ("chat_template", "Chat template"), ("license", "Licence"))


class ClickableLabel(QLabel):
    """A label that says when it is clicked (the status bar's model name opens the manager)."""

    clicked = Signal()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # Override QLabel.mouseReleaseEvent.
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()
        super().mouseReleaseEvent(event)


class InstalledPage(QWidget):
    """The library: a searchable table, the selected model's details, fit and own settings."""

    def __init__(self, adapter: ControllerAdapter, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.adapter = adapter
        self.library = adapter.controller.library
        self._shown: tuple[str, Any] | None = None  # (model id, defaults) the form shows
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search your models")
        self.search.setClearButtonEnabled(True)
        self.add_file_button = QPushButton("Add a &file…", self)
        self.add_folder_button = QPushButton("Add a fol&der…", self)
        self.filter = ModelFilter(self)
        self.filter.setSourceModel(adapter.installed)
        self.view = table(self, self.filter, "installed")
        self.total = QLabel(self)
        self.details = QTextBrowser(self)
        self.details.setObjectName("modelDetails")
        self.details.setFrameShape(QFrame.Shape.NoFrame)
        # Long paths break anywhere rather than widen the pane.
        self.details.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.load_button = QPushButton("&Load", self)
        self.default_button = QPushButton("Set as defa&ult", self)
        self.remove_button = QPushButton("&Remove…", self)
        self.form = ModelSettingsForm(self)
        self._lay_out()
        self.search.textChanged.connect(self.filter.set_text)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self.show_selected())
        for signal in (adapter.installed.dataChanged, adapter.installed.rowsRemoved, adapter.installed.totalsChanged):
            signal.connect(lambda *_: self.show_selected())
        adapter.installed.totalsChanged.connect(self._show_total)
        self.add_file_button.clicked.connect(self.add_file)
        self.add_folder_button.clicked.connect(self.add_folder)
        self.load_button.clicked.connect(lambda: self._act(self.library.load))
        self.default_button.clicked.connect(lambda: self._act(self.library.set_default))
        self.remove_button.clicked.connect(self.remove)
        self.form.saveRequested.connect(self._save_defaults)
        self._show_total()
        self.show_selected()

    def _lay_out(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.add_file_button)
        top.addWidget(self.add_folder_button)
        left = QWidget(self)
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.view, 1)
        left_layout.addWidget(self.total)
        buttons = QHBoxLayout()
        for button in (self.load_button, self.default_button, self.remove_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        settings = QWidget(self)
        settings_layout = QVBoxLayout(settings)
        heading = QLabel("This model's own settings. A chat's own settings go over these; a ticked box "
                         "uses the app's setting (File → Settings…).", settings)
        heading.setWordWrap(True)
        settings_layout.addWidget(heading)
        settings_layout.addWidget(self.form)
        settings_layout.addStretch(1)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(settings)
        self.pane_tabs = QTabWidget(self)
        self.pane_tabs.addTab(self.details, "De&tails")
        self.pane_tabs.addTab(scroll, "&Settings")
        self.pane = QWidget(self)
        pane_layout = QVBoxLayout(self.pane)
        pane_layout.setContentsMargins(0, 0, 0, 0)
        pane_layout.addLayout(buttons)
        pane_layout.addWidget(self.pane_tabs, 1)
        splitter = QSplitter(self)
        splitter.addWidget(left)
        splitter.addWidget(self.pane)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([790, 390])
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(splitter, 1)

    def _show_total(self) -> None:
        model = self.adapter.installed
        text = f"Kestrel's models folder: {human_size(model.disk_total)}"
        if model.referenced_total():
            text += f" · models kept where you keep them: {human_size(model.referenced_total())}"
        self.total.setText(text)

    def show_selected(self) -> None:
        """Show the selected model's details and settings (an empty pane without one)."""
        row = selected_row(self.view)
        self.pane.setEnabled(row is not None)
        if row is None:
            self.details.setText("Choose a model to see its details and settings.")
            self._shown = None
            for button in (self.load_button, self.default_button, self.remove_button):
                button.setEnabled(False)
            return
        model = row.model
        self.details.setText(details_html(row))
        self.load_button.setEnabled(not model.missing and not row.is_loaded and row.problem is None)
        self.default_button.setEnabled(not model.missing and not row.is_default)
        self.remove_button.setEnabled(True)
        self.remove_button.setText("Fo&rget…" if model.referenced else "&Remove…")
        if self._shown != (model.id, model.defaults):
            # Only when another model is chosen or its saved settings changed: edits in
            # progress survive a fresh listing.
            self._shown = (model.id, model.defaults)
            settings = self.adapter.controller.settings
            self.form.show_defaults(model.defaults, settings.generation, settings.device_preference)

    def _act(self, method: Callable[[str], Coroutine[Any, Any, bool]]) -> None:
        row = selected_row(self.view)
        if row is not None:
            self.adapter.spawn(method(row.model.id))

    def _save_defaults(self, defaults: ModelDefaults) -> None:
        row = selected_row(self.view)
        if row is not None:
            self.adapter.spawn(self.library.set_defaults(row.model.id, defaults))

    def remove(self) -> None:
        row = selected_row(self.view)
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
    """The catalog, filtered to what fits this machine unless asked otherwise, and Download;
    below it, any other model by pasting its repository or link (`link`).

    Signals: downloadStarted (switch to the downloads page).
    """

    downloadStarted = Signal()

    def __init__(self, adapter: ControllerAdapter, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.adapter = adapter
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search the catalog")
        self.search.setClearButtonEnabled(True)
        self.fits_only = QCheckBox("&Only models that fit this machine", self)
        self.filter = ModelFilter(self)
        self.filter.setSourceModel(adapter.catalog)
        self.view = table(self, self.filter, "catalog")
        self.about = QLabel(self)
        self.about.setWordWrap(True)
        self.download_button = QPushButton("&Download", self)
        self.link = LinkLookup(adapter, self)
        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.fits_only)
        bottom = QHBoxLayout()
        bottom.addWidget(self.about, 1)
        bottom.addWidget(self.download_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.view, 1)
        layout.addLayout(bottom)
        other = QGroupBox("Another model: from a Hugging Face repository or a link", self)
        QVBoxLayout(other).addWidget(self.link)
        layout.addWidget(other)
        self.search.textChanged.connect(self.filter.set_text)
        self.fits_only.toggled.connect(self.filter.set_fits_only)
        self.fits_only.setChecked(True)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self.show_selected())
        adapter.catalog.dataChanged.connect(lambda *_: self.show_selected())
        self.download_button.clicked.connect(self.download)
        self.link.downloadStarted.connect(self.downloadStarted)
        self.show_selected()

    def show_selected(self) -> None:
        row = selected_row(self.view)
        self.download_button.setEnabled(row is not None and row.installed_id is None)
        if row is None:
            self.about.setToolTip("")
            self.about.setText("Choose a model to download. Downloads, and looking up what you paste below, "
                               "are the only times Kestrel uses the network.")
            return
        # The verdict's one line here, its numbers on hover: the whole list of them would
        # leave the table a few rows under the paste-a-link box.
        verdict = row.fit.summary if row.fit is not None else verdict_tooltip(None)
        self.about.setText(f"<b>{_escape(row.entry.name)}</b> — {_escape(row.entry.description)}<br>"
                           f"{_escape(verdict)} (hover for the numbers)<br>"
                           f"From huggingface.co/{_escape(row.entry.repo)}")
        self.about.setToolTip(verdict_tooltip(row.fit))

    def download(self) -> None:
        row = selected_row(self.view)
        if row is not None:
            self.adapter.controller.library.download(row.entry)
            self.downloadStarted.emit()


class ModelManager(QDialog):
    """Not modal: the chat goes on while it is open. Opening it asks for a fresh listing."""

    def __init__(self, adapter: ControllerAdapter, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.adapter = adapter
        self.setWindowTitle("Models")
        self.setModal(False)
        self.resize(1220, 700)
        self.tabs = QTabWidget(self)
        self.installed = InstalledPage(adapter, self.tabs)
        self.catalog = CatalogPage(adapter, self.tabs)
        self.downloads = DownloadsPage(adapter, self.tabs)
        self.tabs.addTab(self.installed, "&Installed")
        self.tabs.addTab(self.catalog, "&Get a model")
        self.tabs.addTab(self.downloads, "Do&wnloads")
        self.catalog.downloadStarted.connect(lambda: self.tabs.setCurrentWidget(self.downloads))
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)

    def showEvent(self, event: QShowEvent) -> None:  # Override QDialog.showEvent.
        super().showEvent(event)
        self.adapter.spawn(self.adapter.controller.library.refresh())


def details_html(row: Any) -> str:
    """Everything known about an installed model, and its fit with the numbers behind it."""
    model = row.model
    lines = [f"<h3>{_escape(model.title)}</h3>"]
    if row.problem:
        lines.append(f"<p><b>{_escape(row.problem)}</b></p>")
    cells = []
    for key, label in _DETAILS:
        value = row.details.get(key)
        if key == "parameters_label" and not value and row.details.get("parameters"):
            value = f"{row.details['parameters']:,}"
        if value is None or value == "":
            continue
        if key == "file_size":
            value = human_size(int(value))
        elif key == "chat_template":
            value = "in the file" if value else "none in the file (set one below)"
        elif key == "context_length":
            value = f"{value:,} tokens"
        cells.append((label, str(value)))
    where = "kept where you keep it" if model.referenced else "in Kestrel's models folder"
    cells += [("File", f"{model.path} ({where})"), ("Source", model.source)]
    lines.append("<table>" + "".join(f"<tr><td>{_escape(label)}:&nbsp;</td><td>{_escape(value)}</td></tr>"
                                     for label, value in cells) + "</table>")
    if row.fit is not None:
        lines.append("<p><b>Will it fit?</b> " + _escape(verdict_tooltip(row.fit)).replace("\n", "<br>") + "</p>")
    return "".join(lines)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
