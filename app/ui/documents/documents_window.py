"""The Documents window: the folders chats can search, how far their indexing is, and their files."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFont, QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import (QDialog, QFileDialog, QHBoxLayout, QLabel, QMessageBox,
                               QPushButton, QSplitter, QStackedWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from app.documents.collections import DocumentsError
from app.library.catalog import CatalogEntry
from app.library.model_files.model_purpose import ModelPurpose
from app.service.documents_events import PAUSED_WORDS
from app.service.events import CollectionInfo, IndexingProgress
from app.ui.common import icons
from app.ui.documents.documents_embedding import EmbeddingLine
from app.ui.documents.documents_files import FilesPanel, ordered
from app.ui.documents.documents_parts import EmptyPage, ProgressRow, collections_table, name_dialog
from app.ui.documents.documents_words import ago, files_words, is_busy, is_going, state_words
from app.ui.common.warning_row import WarningRow

if TYPE_CHECKING:
    from app.library.installed import InstalledModel
    from app.service.doors.documents import DocumentsDoor
    from app.ui.state.adapter import ServiceAdapter

FILES_DELAY_MS = 1000  # while a collection is read its file list is asked for again at most this often
AGO_EVERY_MS = 30_000  # "2 minutes ago" moves on by itself


def bold(label: QLabel) -> QFont:
    font = label.font()
    font.setBold(True)
    return font


def remove_question(name: str) -> str:
    return (f"Remove the collection “{name}”? Kestrel forgets its index; the files in its folder stay where they "
            "are. Chats that search it answer without it.")


class DocumentsWindow(QDialog):
    """Not modal: the chat goes on while it is open.

    Parts tests reach for: `stack` (the `empty` page until a collection exists, then `page`),
    `add_first` (the empty page's one action), `add_folder`, `reindex`, `remove`, `collections`
    (the table, a row per collection), `progress` + `progress_words` + `pause` (shown while a
    collection is indexed or waits), `problem` (a WarningRow, shown after a DocumentsProblem or
    a refused command), `files` (FilesPanel), `embedding` (EmbeddingLine). Signal:
    modelsRequested (open the model manager to get an embedding model). `choose_folder`,
    `ask_name` and `confirm` are the dialogs it asks through (tests replace them).
    """

    modelsRequested = Signal()

    def __init__(self, adapter: "ServiceAdapter", documents: "DocumentsDoor", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._adapter = adapter
        self._documents = documents
        self._infos: tuple[CollectionInfo, ...] = ()
        self._progress: dict[str, IndexingProgress] = {}
        self._embedding_shown: tuple[object, ...] | None = None
        self._adopt: str | None = None  # the catalog entry downloaded from here: chosen once installed
        self._problem_of: str | None = ""  # the shown problem's collection; None: a refused command's
        self._files_asked = 0  # the newest files() request: an older answer that comes late is dropped
        self.setWindowTitle("Documents")
        self.setModal(False)
        self.setWindowIcon(icons.icon("folder"))
        self.add_folder = self._button("&Add folder…", "new-folder", "Add a folder whose documents chats can search")
        self.add_folder.clicked.connect(self.choose_and_add)
        self.reindex = self._button("&Reindex", "regenerate", "Read the selected collection's folder again")
        self.reindex.clicked.connect(self.reindex_selected)
        self.remove = self._button("Re&move…", "delete", "Forget the selected collection (its files stay)")
        self.remove.clicked.connect(self.remove_selected)
        self.collections = collections_table(self)
        self.collections.itemSelectionChanged.connect(self._selection_changed)
        remove_key = QShortcut(QKeySequence.StandardKey.Delete, self.collections)
        remove_key.setContext(Qt.ShortcutContext.WidgetShortcut)
        remove_key.activated.connect(self.remove_selected)  # it asks first, as the button does
        self.progress_row = ProgressRow(self)
        self.progress, self.progress_words, self.pause = (self.progress_row.bar, self.progress_row.words,
                                                          self.progress_row.pause)
        self.pause.clicked.connect(self.toggle_pause)
        self.problem = WarningRow("", self)
        self.problem.hide()
        self.files = FilesPanel(self)
        self.embedding = EmbeddingLine(self)
        self.embedding.modelsRequested.connect(self.modelsRequested)
        self.embedding.modelChosen.connect(self.choose_model)
        self.embedding.downloadRequested.connect(self.download_offer)
        self.stack = QStackedWidget(self)
        self.empty = EmptyPage(self)
        self.add_first = self.empty.add_first
        self.add_first.clicked.connect(self.choose_and_add)
        self.page = self._collections_page()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.page)
        self._lay_out()
        self._files_timer = QTimer(self)
        self._files_timer.setSingleShot(True)
        self._files_timer.setInterval(FILES_DELAY_MS)
        self._files_timer.timeout.connect(self.load_files)
        self._ago_timer = QTimer(self)
        self._ago_timer.setInterval(AGO_EVERY_MS)
        self._ago_timer.timeout.connect(self._refresh_ago)
        self._ago_timer.start()
        adapter.collectionsChanged.connect(self.show_collections)
        adapter.collectionsChanged.connect(self.refresh_embedding)  # the service may have chosen another model
        adapter.indexingProgress.connect(self.show_progress)
        adapter.documentsProblem.connect(self.show_problem)
        adapter.catalogListed.connect(self.refresh_embedding)
        adapter.downloadChanged.connect(self.refresh_embedding)
        installed = adapter.installed  # changed row by row, not reset: every kind of change is heard
        for changed in (installed.modelReset, installed.rowsInserted, installed.rowsRemoved, installed.dataChanged):
            changed.connect(self.refresh_embedding)  # a bound slot: let go of when this window is
        self.show_collections(self._documents.collections())
        self.refresh_embedding()
        self._size_to_screen()
        (self.collections if self._infos else self.add_first).setFocus()

    def _size_to_screen(self) -> None:
        """900×620, or less where the screen is smaller (a laptop at 200% leaves 960×540)."""
        screen = (self.parentWidget() or self).screen() or QGuiApplication.primaryScreen()
        room = screen.availableGeometry()
        self.resize(min(900, room.width() * 9 // 10), min(620, room.height() * 9 // 10))

    # --- building -----------------------------------------------------------------------

    def _button(self, text: str, icon: str, tip: str) -> QPushButton:
        button = QPushButton(text, self)
        button.setToolTip(tip)
        icons.themed(button, icon)
        return button

    def _collections_page(self) -> QWidget:
        page = QWidget(self)
        top = QHBoxLayout()
        heading = QLabel("Collections", page)
        heading.setFont(bold(heading))
        top.addWidget(heading, 1)
        for button in (self.add_folder, self.reindex, self.remove):
            button.setParent(page)
            top.addWidget(button)
        upper = QWidget(page)
        upper_layout = QVBoxLayout(upper)
        upper_layout.setContentsMargins(0, 0, 0, 6)  # the splitter's handle clear of the progress words
        upper_layout.addLayout(top)
        self.collections.setParent(upper)
        upper_layout.addWidget(self.collections, 1)
        upper_layout.addWidget(self.progress_row)
        split = QSplitter(Qt.Orientation.Vertical, page)
        split.setChildrenCollapsible(False)
        split.addWidget(upper)
        self.files.setParent(split)
        split.addWidget(self.files)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 2)
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split, 1)
        return page

    def _lay_out(self) -> None:
        close = QPushButton("Close", self)
        close.setObjectName("documentsClose")
        close.clicked.connect(self.close)
        bottom = QHBoxLayout()
        bottom.addWidget(self.embedding, 1)
        bottom.addSpacing(12)
        bottom.addWidget(close, 0, Qt.AlignmentFlag.AlignBottom)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 16, 16, 12)
        layout.setSpacing(10)
        layout.addWidget(self.problem)
        layout.addWidget(self.stack, 1)
        layout.addLayout(bottom)

    # --- what the service says ------------------------------------------------------------

    def show_collections(self, infos: Sequence[CollectionInfo]) -> None:
        """The collections as the service last knew them; the selection stays on its collection."""
        before = self.selected()
        previous = {info.name: info for info in self._infos}
        self._infos = tuple(infos)
        if self.stack.currentWidget() is not (self.page if self._infos else self.empty):
            self.stack.setCurrentWidget(self.page if self._infos else self.empty)
            (self.collections if self._infos else self.add_first).setFocus()
        table = self.collections
        table.blockSignals(True)
        table.setRowCount(len(self._infos))
        for row, info in enumerate(self._infos):
            cells = (info.name, str(info.folder), files_words(info), ago(info.last_indexed), state_words(info))
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                if column == 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                table.setItem(row, column, item)
        names = [info.name for info in self._infos]
        keep = before if before in names else (names[0] if names else None)
        if keep is not None:
            table.selectRow(names.index(keep))
        table.blockSignals(False)
        for name in list(self._progress):
            if name not in names or not is_busy(self._info(name).state):
                del self._progress[name]
        self._update_buttons()
        self._update_progress()
        self._problem_settled()
        if keep != before:
            self.load_files()
        elif keep is not None and previous.get(keep) != self._info(keep) and not self._files_timer.isActive():
            self._files_timer.start()  # its counts moved: the list follows, at most once a second

    def show_progress(self, progress: object) -> None:
        assert isinstance(progress, IndexingProgress)
        self._progress[progress.collection] = progress
        self._update_progress()

    def show_problem(self, collection: str, text: str) -> None:
        """A problem the service reports: shown until the next one, or until its collection is
        gone or indexed again (one about the whole index, "", stays)."""
        self._problem_of = collection
        self.problem.text.setText(f"{collection}: {text}" if collection and collection not in text else text)
        self.problem.show()

    def _refused(self, text: str) -> None:
        """A command the service refused: said until the next command goes through."""
        self.show_problem("", text)
        self._problem_of = None

    def _problem_settled(self) -> None:
        """Hide a collection's problem once it is gone or indexed again."""
        name = self._problem_of
        if not name:
            return
        info = next((info for info in self._infos if info.name == name), None)
        if info is None or is_going(info.state):
            self.problem.hide()
            self._problem_of = ""

    def refresh_embedding(self) -> None:
        """The embedding model line, after the service chose one, the installed models changed
        or the offered model's download moved on (refilled only when something did: an open
        picker is not reset under the pointer). A model downloaded from here is chosen once in."""
        installed: list["InstalledModel"] = [row.model for row in self._adapter.installed.rows()
                                             if row.model.purpose is ModelPurpose.EMBEDDING and not row.model.missing]
        offers = [row.entry for row in self._adapter.catalog.rows() if row.entry.purpose is ModelPurpose.EMBEDDING]
        offer = offers[0] if offers else None
        download = next((item for item in reversed(self._adapter.downloads.rows())
                         if offer is not None and item.catalog_id == offer.id), None)
        chosen = self._documents.embedding_model()
        if (self._adopt is not None and download is not None and download.model_id in {m.id for m in installed}
                and chosen is None):
            self._adopt = None
            self.choose_model(download.model_id)
        shown = (chosen, tuple((model.id, model.title) for model in installed), offer, download)
        if shown != self._embedding_shown:
            self._embedding_shown = shown
            self.embedding.show_choice(chosen, installed, offer, download)

    def download_offer(self, entry: object) -> None:
        """Download the catalog's embedding model; the line follows the download, then uses it."""
        assert isinstance(entry, CatalogEntry)
        self._adopt = entry.id
        self._documents.download(entry)

    def _update_buttons(self) -> None:
        chosen = self.selected() is not None
        self.reindex.setEnabled(chosen)
        self.remove.setEnabled(chosen)

    def _update_progress(self) -> None:
        """The bar for the selected collection while it is busy, else for any busy one; hidden when none is."""
        busy = [info for info in self._infos if is_busy(info.state)]
        paused = self._documents.waiting_because() == PAUSED_WORDS  # the user's hold, said at once
        shown = next((info for info in busy if info.name == self.selected()), busy[0] if busy else None)
        self.progress_row.show_state(shown, self._progress.get(shown.name) if shown else None, paused)

    def _refresh_ago(self) -> None:
        for row, info in enumerate(self._infos):
            item = self.collections.item(row, 3)
            if item is not None:
                item.setText(ago(info.last_indexed))

    def _info(self, name: str) -> CollectionInfo:
        return next(info for info in self._infos if info.name == name)

    # --- what the user does ---------------------------------------------------------------

    def selected(self) -> str | None:
        """The selected collection's name."""
        rows = self.collections.selectionModel().selectedRows()
        if not rows or rows[0].row() >= len(self._infos):
            return None
        return self._infos[rows[0].row()].name

    def _selection_changed(self) -> None:
        self._update_buttons()
        self._update_progress()
        self.load_files()

    def load_files(self) -> None:
        """Ask the service for the selected collection's files (off the UI thread)."""
        self._files_timer.stop()
        name = self.selected()
        if name is None:
            self.files.show_files(None, None, ())
            return
        self._files_asked += 1
        self._spawn(self._load_files(name, self._files_asked), command=False)

    async def _load_files(self, name: str, asked: int) -> None:
        found = await asyncio.to_thread(ordered, await self._documents.files(name))
        if asked == self._files_asked and name == self.selected():
            self.files.show_files(name, self._info(name).folder, found)

    def choose_folder(self) -> Path | None:
        chosen = QFileDialog.getExistingDirectory(self, "Add a folder of documents")
        return Path(chosen) if chosen else None

    def ask_name(self, default: str) -> str | None:
        dialog = name_dialog(self, default)
        ok = dialog.exec() == QDialog.DialogCode.Accepted
        return dialog.textValue().strip() or default if ok else None

    def confirm(self, question: str) -> bool:
        return QMessageBox.question(self, "Documents", question) == QMessageBox.StandardButton.Yes

    def choose_and_add(self) -> None:
        """Add folder…: a folder, then its name (the folder's own by default); indexing goes on in the background."""
        folder = self.choose_folder()
        if folder is None:
            return
        name = self.ask_name(folder.name or str(folder))
        if name is not None:
            self._spawn(self._add(folder, name))

    async def _add(self, folder: Path, name: str) -> None:
        info = await self._documents.add_folder(folder, name)
        if info.name not in {shown.name for shown in self._infos}:
            self.show_collections((*self._infos, info))
        self.collections.selectRow([shown.name for shown in self._infos].index(info.name))

    def reindex_selected(self) -> None:
        name = self.selected()
        if name is not None:
            self._spawn(self._documents.reindex(name))

    def remove_selected(self) -> None:
        name = self.selected()
        if name is not None and self.confirm(remove_question(name)):
            self._spawn(self._documents.remove(name))

    def toggle_pause(self) -> None:
        if self.progress_row.paused:
            self._documents.resume()
        else:
            self._documents.pause()
        self._update_progress()

    def choose_model(self, model_id: object) -> None:
        assert isinstance(model_id, str)
        self._spawn(self._choose_model(model_id))

    async def _choose_model(self, model_id: str) -> None:
        await self._documents.choose_embedding_model(model_id)
        self.refresh_embedding()

    def _spawn(self, work: Coroutine[Any, Any, Any], command: bool = True) -> None:
        self._adapter.spawn(self._said(work, command))

    async def _said(self, work: Coroutine[Any, Any, Any], command: bool) -> None:
        """Run a service call; one it refuses (DocumentsError: plain words) is said in the window.
        A refusal is answered by the user's next command that goes through, not by the file
        list coming in meanwhile (`command` False)."""
        try:
            await work
        except DocumentsError as exc:
            self._refused(str(exc))
            return
        if command and self._problem_of is None:
            self.problem.hide()
            self._problem_of = ""
