"""Paste a Hugging Face repository or a link, look it up, pick one of the models it offers, download it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QLabel, QLineEdit, QPushButton, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

from app.core.units import human_size

if TYPE_CHECKING:
    from app.library.huggingface.hub import DownloadUnit
    from app.service.doors.models import LibraryDoor
    from app.ui.state.adapter import ServiceAdapter

_UNIT = Qt.ItemDataRole.UserRole + 1


class LinkLookup(QWidget):
    """A line to paste into, Look up, the models found there (one row each), and Download.

    Looking up is the only network use outside a download, and only when the user asks:
    nothing is sent while typing. units: what the last lookup found.
    Signals: downloadStarted (a download was queued; show the downloads).
    """

    downloadStarted = Signal()

    def __init__(self, adapter: ServiceAdapter, library: LibraryDoor, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.adapter = adapter
        self._library = library
        self.units: tuple[DownloadUnit, ...] = ()
        self._looking: str | None = None  # the text being looked up now
        self._problems: list[str] = []    # what the service said during this lookup
        self.link = QLineEdit(self)
        # Short enough to show whole at 200%; the box's title says what it is for.
        self.link.setPlaceholderText("owner/name or a link to a .gguf file")
        self.link.setToolTip("Paste a Hugging Face repository (owner/name), a huggingface.co page or file "
                             "link, or any link to a .gguf file.")
        self.link.setAccessibleName("Repository or link")
        self.link.setClearButtonEnabled(True)
        self.look_up_button = QPushButton("&Look up", self)
        self.note = QLabel(self)
        self.note.setObjectName("lookupNote")
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.found = QTreeWidget(self)
        self.found.setObjectName("found")
        self.found.setAccessibleName("Models found")
        self.found.setHeaderLabels(["Model", "Format", "Size"])
        self.found.setRootIsDecorated(False)
        self.found.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.found.setAlternatingRowColors(True)
        self.download_button = QPushButton("Dow&nload", self)
        self._lay_out()
        self.link.returnPressed.connect(self.look_up)
        self.link.textChanged.connect(lambda _: self._enable())
        self.look_up_button.clicked.connect(self.look_up)
        self.found.itemSelectionChanged.connect(self._enable)
        self.found.itemDoubleClicked.connect(lambda *_: self.download())
        self.download_button.clicked.connect(self.download)
        adapter.problem.connect(self._problem)
        self._show_units(())

    def _lay_out(self) -> None:
        line = QHBoxLayout()
        line.addWidget(self.link, 1)
        line.addWidget(self.look_up_button)
        below = QHBoxLayout()
        below.addWidget(self.note, 1)
        below.addWidget(self.download_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(line)
        layout.addWidget(self.found)
        layout.addLayout(below)

    def look_up(self) -> None:
        """Ask the service what the pasted text offers (on its worker thread; the window goes on)."""
        text = self.link.text().strip()
        if not text or self._looking is not None:
            return
        self._looking = text
        self._problems.clear()
        self._show_units(())
        self.note.setText(f"Looking up {text}…")
        self._enable()
        task = self.adapter.spawn(self._library.look_up(text))
        task.add_done_callback(lambda done: self._looked_up(text, done))

    def _looked_up(self, text: str, task: asyncio.Task) -> None:
        if not shiboken6.isValid(self):
            return  # the window closed while the server was answering
        self._looking = None
        if task.cancelled():
            self.note.setText("The lookup was stopped.")
            self._enable()
            return
        failure = task.exception()
        if failure is not None:
            self.note.setText(f"Kestrel could not look up {text}: {failure}")
            self._enable()
            raise failure  # a bug, not the user's doing: the event loop logs it
        self._show_units(task.result())
        self.note.setText(self._found_words(text))

    def _found_words(self, text: str) -> str:
        if self._problems:
            return self._problems[-1]
        if not self.units:
            return (f"{text} holds no GGUF file and no ONNX Runtime GenAI folder (one with genai_config.json), "
                    "so nothing in it is a model Kestrel can run. Check the name, or paste a link to a .gguf file.")
        if len(self.units) == 1:
            return f"Found {self.units[0].title}. Press Download to get it."
        return f"{text} offers {len(self.units)} models. Pick one, then press Download."

    def _problem(self, text: str) -> None:
        if self._looking is not None:
            self._problems.append(text)

    def _show_units(self, units: tuple[DownloadUnit, ...]) -> None:
        self.units = units
        self.found.clear()
        for unit in units:
            parts = f" ({len(unit.files)} files)" if len(unit.files) > 1 else ""
            size = human_size(unit.size) if unit.size is not None else "size from the server"
            item = QTreeWidgetItem([unit.title + parts, unit.format.upper(), size])
            item.setToolTip(0, f"{unit.key}\nfrom {unit.source}")
            item.setData(0, _UNIT, unit)
            self.found.addTopLevelItem(item)
        for column in range(self.found.columnCount()):
            self.found.resizeColumnToContents(column)
        self._fit_height(len(units))
        self.found.setVisible(bool(units))
        first = self.found.topLevelItem(0)
        if len(units) == 1 and first is not None:
            self.found.setCurrentItem(first)
        self._enable()

    def _fit_height(self, rows: int) -> None:
        """As tall as its rows (up to six, then it scrolls): the catalog above keeps the room."""
        row = self.found.sizeHintForRow(0) if rows else 0
        frame = 2 * self.found.frameWidth()
        self.found.setFixedHeight(self.found.header().sizeHint().height() + min(rows, 6) * row + frame + 2)

    def picked(self) -> DownloadUnit | None:
        """The unit chosen in the list, or None."""
        items = self.found.selectedItems()
        return items[0].data(0, _UNIT) if items else None

    def download(self) -> None:
        unit = self.picked()
        if unit is None or self._looking is not None:
            return
        self._library.download_unit(unit)
        self.downloadStarted.emit()

    def _enable(self) -> None:
        idle = self._looking is None
        self.look_up_button.setEnabled(idle and bool(self.link.text().strip()))
        self.download_button.setEnabled(idle and self.picked() is not None)
