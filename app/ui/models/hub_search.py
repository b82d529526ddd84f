"""Search Hugging Face from "Get a model": repositories as the user types, a chosen one's files
with quantization, size and how fast each would run here, and Download on each file."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import shiboken6
from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPushButton,
                               QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from app.core.units import human_size
from app.service.library.hub_search import SPEED_NOT_KNOWN
from app.ui.common.text_room import elides_on_purpose
from app.ui.state.fit_verdict import verdict_icon, verdict_words

if TYPE_CHECKING:
    from app.service.library.hub_search import ChoiceRow, FoundRepos, RepoListing
    from app.service.doors.models import LibraryDoor
    from app.ui.state.adapter import ServiceAdapter

# Typing waits this long after the last key, and for this many characters, before asking.
PAUSE_MS = 400
MIN_CHARS = 2
PLACEHOLDER = "Search Hugging Face…"
# Under the empty line: the one time Kestrel asks huggingface.co (the placeholder is too short for it).
QUIET = "Kestrel asks huggingface.co only when you type here."
_DATA = Qt.ItemDataRole.UserRole + 1
# The files' columns: the Download button before the file's name, which may be long.
_BUTTON, _FILE = 3, 4


class HubSearchBox(QWidget):
    """A search line, the repositories it finds, and the chosen repository's files.

    Nothing is sent until the user types MIN_CHARS characters and pauses PAUSE_MS; each
    newer query supersedes the one before. Keyboard: Up/Down in the line move through the
    results, Enter opens the chosen repository, Esc clears.
    Signals: downloadStarted (a download was queued; show the downloads).
    """

    downloadStarted = Signal()

    def __init__(self, adapter: ServiceAdapter, library: LibraryDoor, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.adapter = adapter
        self._library = library
        self.query = QLineEdit(self)
        self.query.setPlaceholderText(PLACEHOLDER)
        self.query.setAccessibleName("Search Hugging Face")
        self.query.setClearButtonEnabled(True)
        self.kind = QComboBox(self)
        self.kind.setAccessibleName("Kind of model files")
        self.kind.addItem("GGUF", "gguf")
        self.kind.addItem("ONNX", "onnx")
        self.kind.setToolTip("GGUF files run with llama.cpp; ONNX Runtime GenAI folders with ONNX Runtime.")
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(PAUSE_MS)
        self.note = QLabel(self)
        self.note.setObjectName("hubSearchNote")
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # Names can be long ("someone/model-12B-…-GGUF"): they take the room left and lose their
        # middle, with the whole name as the tooltip, so the numbers beside them stay in view.
        self.repos = _tree(self, "hubRepos", "Repositories found", ["Repository", "Downloads", "Likes", "Updated"],
                           stretch=0)
        elides_on_purpose(self.repos, 0)  # each item's tooltip is its whole name
        # The file's name with what comes with it ("… + mmproj-….gguf, which lets it read images"):
        # the pane is narrower than that even at 100%, so it loses its middle, whole in the tooltip.
        self.files = _tree(self, "hubFiles", "Files of the chosen repository",
                           ["Quantization", "Size", "How it runs here", "", "File"], stretch=_FILE)
        elides_on_purpose(self.files, _FILE)
        self.files_note = QLabel(self)
        self.files_note.setObjectName("hubFilesNote")
        self.files_note.setWordWrap(True)
        self._searched: tuple[str, str] | None = None  # (query, kind) shown or asked for
        self._listing: str | None = None    # the repository whose files are shown (or asked for)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        line = QHBoxLayout()
        line.addWidget(self.query, 1)
        line.addWidget(self.kind)
        layout.addLayout(line)
        for widget in (self.note, self.repos, self.files_note, self.files):
            layout.addWidget(widget)
        layout.addStretch()  # words stay under the line while no list is shown
        self.note.setText(QUIET)
        self.query.textChanged.connect(self._typed)
        self.kind.currentIndexChanged.connect(lambda _index: self.search_now())
        self.query.installEventFilter(self)
        self.timer.timeout.connect(self.search_now)
        self.repos.itemActivated.connect(lambda item, _column: self.open_repo(item.data(0, _DATA)))
        self.files.itemActivated.connect(lambda item, _column: self.download(item.data(0, _DATA)))
        self._show_repos(())
        self._show_files(None)

    # --- searching ---------------------------------------------------------------------

    def _typed(self, text: str) -> None:
        if len(text.strip()) < MIN_CHARS:
            self.timer.stop()
            self._searched = self._listing = None
            self.note.setText(QUIET if not text.strip() else f"Type at least {MIN_CHARS} characters to search.")
            self._show_repos(())
            self._show_files(None)
            return
        self.timer.start()  # restarted by every key: the search waits for a pause

    def search_now(self) -> None:
        """Ask the hub for what the line says now (on the service's worker thread)."""
        self.timer.stop()
        asked = (self.query.text().strip(), str(self.kind.currentData()))
        if len(asked[0]) < MIN_CHARS or asked == self._searched:
            return
        self._searched, self._listing = asked, None
        self._show_files(None)
        self.note.setText("Searching…")
        task = self.adapter.spawn(self._library.hub_search(asked[0], fmt=asked[1]))
        task.add_done_callback(lambda done: self._found(asked, done))

    def _found(self, asked: tuple[str, str], task: asyncio.Task[Any]) -> None:
        if not shiboken6.isValid(self) or task.cancelled() or asked != self._searched:
            return  # the window closed, or a newer query took over
        query, kind = asked[0], asked[1].upper()
        failure = task.exception()
        if failure is not None:
            self.note.setText(f"Kestrel could not search Hugging Face for “{query}”: {failure}")
            raise failure  # a bug, not the user's doing: the event loop logs it
        found: FoundRepos | None = task.result()
        if found is None:
            return
        if found.problem is not None:
            self.note.setText(found.problem)
        elif not found.repos:
            self.note.setText(f"No {kind} models match “{query}” on Hugging Face. Try fewer or other words.")
        else:
            self.note.setText(f"{len(found.repos)} repositories hold {kind} models matching “{query}”, most "
                              "downloaded first. Choose one (Enter) to see its files.")
        self._show_repos(found.repos)

    def _show_repos(self, repos: tuple[Any, ...]) -> None:
        self.repos.clear()
        for repo in repos:
            downloads = "-" if repo.downloads is None else f"{repo.downloads:,}"
            likes = "-" if repo.likes is None else f"{repo.likes:,}"
            item = QTreeWidgetItem([repo.id, downloads, likes, repo.updated or "-"])
            item.setData(0, _DATA, repo.id)
            for column in (1, 2):  # counts line up on their last digit
                item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            item.setToolTip(0, repo.id + ("\n\nGated: Hugging Face asks you to accept its terms in a browser "
                                          "first, so Kestrel may not be able to download it." if repo.gated else ""))
            self.repos.addTopLevelItem(item)
        self.repos.setVisible(bool(repos))
        first = self.repos.topLevelItem(0)
        if first is not None:
            self.repos.setCurrentItem(first)

    # --- a repository's files ----------------------------------------------------------

    def open_repo(self, repo: str | None) -> None:
        """List repo's files with their fit (on the service's worker thread)."""
        if not repo:
            return
        self._listing = repo
        self._show_files(None)
        self.files_note.setText(f"Listing the files of {repo}…")
        task = self.adapter.spawn(self._library.hub_choices(repo))
        task.add_done_callback(lambda done: self._listed(repo, done))

    def _listed(self, repo: str, task: asyncio.Task[Any]) -> None:
        if not shiboken6.isValid(self) or task.cancelled() or repo != self._listing:
            return
        failure = task.exception()
        if failure is not None:
            self.files_note.setText(f"Kestrel could not list the files of {repo}: {failure}")
            raise failure
        listing: RepoListing | None = task.result()
        if listing is None:
            return
        if listing.problem is not None:
            self.files_note.setText(listing.problem)
        elif not listing.rows:
            self.files_note.setText(f"{repo} holds no GGUF file and no ONNX Runtime GenAI folder, so nothing "
                                    "in it is a model Kestrel can run.")
        else:
            self.files_note.setText(f"{repo}: pick a quantization and press its Download. Smaller files "
                                    "load and answer faster and need less memory; larger ones answer better. "
                                    "Speeds are estimated from each file's size, so they are rougher than "
                                    "for a model you have.")
        self._show_files(listing)

    def _show_files(self, listing: RepoListing | None) -> None:
        self.files.clear()
        rows = listing.rows if listing is not None else ()
        for row in rows:
            self._add_file(row)
        self.files.setVisible(bool(rows))
        self.files_note.setVisible(self._listing is not None)

    def _add_file(self, row: ChoiceRow) -> None:
        unit = row.choice.unit
        size = human_size(unit.size) if unit.size is not None else "size from the server"
        verdict = verdict_words(row.fit) if row.fit is not None else SPEED_NOT_KNOWN
        item = QTreeWidgetItem([row.choice.quantization or unit.format.upper(), size, verdict, "",
                                unit.key + unit.parts_words])
        item.setData(0, _DATA, row)
        speed = row.fit.speed if row.fit is not None else None
        item.setToolTip(2, row.reason + (f"\nHow it was judged: {speed.basis}" if speed is not None else ""))
        item.setToolTip(_FILE, f"{unit.key}{unit.parts_words}\nfrom {unit.source}")
        if row.fit is not None:
            item.setIcon(2, verdict_icon(row.fit.verdict))
        self.files.addTopLevelItem(item)
        button = QPushButton("Download", self.files)
        button.setAccessibleName(f"Download {unit.key}")
        button.clicked.connect(lambda _checked=False, row=row: self.download(row))
        self.files.setItemWidget(item, _BUTTON, button)

    def download(self, row: ChoiceRow | None) -> None:
        """Queue the file's download through the library, as a pasted repository's file is."""
        if row is None:
            return
        self._library.download_unit(row.choice.unit)
        self.downloadStarted.emit()

    # --- keyboard ----------------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Override QObject.eventFilter.
        if watched is self.query and event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            return self._key(event.key())
        return super().eventFilter(watched, event)

    def _key(self, key: int) -> bool:
        current = self.repos.currentItem()
        if key in (Qt.Key.Key_Down, Qt.Key.Key_Up) and self.repos.topLevelItemCount():
            row = self.repos.indexOfTopLevelItem(current) if current is not None else -1
            row = max(0, min(self.repos.topLevelItemCount() - 1, row + (1 if key == Qt.Key.Key_Down else -1)))
            item = self.repos.topLevelItem(row)
            if item is not None:
                self.repos.setCurrentItem(item)
            return True
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if self.timer.isActive() or (self.query.text().strip(), self.kind.currentData()) != self._searched:
                self.search_now()
            elif current is not None:
                self.open_repo(current.data(0, _DATA))
            return True
        if key == Qt.Key.Key_Escape and self.query.text():
            self.query.clear()
            return True
        return False


def _tree(parent: QWidget, name: str, accessible: str, headers: list[str], *, stretch: int) -> QTreeWidget:
    """A list with headers; column stretch takes the room the others leave (eliding its middle)."""
    tree = QTreeWidget(parent)
    tree.setObjectName(name)
    tree.setAccessibleName(accessible)
    tree.setHeaderLabels(headers)
    tree.setRootIsDecorated(False)
    tree.setAlternatingRowColors(True)
    tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    header = tree.header()
    header.setStretchLastSection(False)
    for column in range(len(headers)):
        mode = QHeaderView.ResizeMode.Stretch if column == stretch else QHeaderView.ResizeMode.ResizeToContents
        header.setSectionResizeMode(column, mode)
    return tree
