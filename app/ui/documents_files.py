"""The Documents window's file list: one collection's files, their state, and why each unreadable one was refused."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QHeaderView, QLabel, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from app.service.events import FileInfo

FILE_COLUMNS = ("File", "State", "Passages", "Note")
_FILE_STATES = {"pending": "Waiting to be read", "indexed": "Indexed", "unreadable": "Unreadable"}
SHOWN_ROWS = 5000  # a table of 10,000 rows is slow to fill and no one scrolls it: the problems come first


def file_state_words(state: str) -> str:
    return _FILE_STATES.get(state, state.capitalize())


def is_problem(info: FileInfo) -> bool:
    """A file the reader refused: what "Only problems" keeps."""
    return info.state == "unreadable"


def ordered(files: Sequence[FileInfo]) -> list[FileInfo]:
    """Problems first (they are what someone opens this list for), then by path."""
    return sorted(files, key=lambda info: (not is_problem(info), str(info.path).lower()))


class FilesPanel(QWidget):
    """The selected collection's files. Parts tests reach for: `heading`, `only_problems`,
    `table` (one row per file shown), `summary` (how many are shown of how many)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._files: tuple[FileInfo, ...] = ()
        self._folder: Path | None = None
        self.heading = QLabel("Files", self)
        self.heading.setObjectName("documentsFilesHeading")
        font = self.heading.font()
        font.setBold(True)
        self.heading.setFont(font)
        self.only_problems = QCheckBox("Only &problems", self)
        self.only_problems.setToolTip("Show only the files that could not be read, with why")
        self.only_problems.toggled.connect(self._fill)
        self.summary = QLabel(self)
        self.summary.setObjectName("documentsFilesSummary")
        self.table = QTableWidget(0, len(FILE_COLUMNS), self)
        self.table.setObjectName("documentsFiles")
        self.table.setHorizontalHeaderLabels(FILE_COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setWordWrap(False)
        self.table.setTabKeyNavigation(False)  # Tab leaves the table: the window stays keyboard reachable
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        top = QHBoxLayout()
        top.addWidget(self.heading)
        top.addStretch(1)
        top.addWidget(self.summary)
        top.addWidget(self.only_problems)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 6, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)

    def show_files(self, name: str | None, folder: Path | None, files: Sequence[FileInfo]) -> None:
        """The files of collection `name` (None: none is selected)."""
        self.heading.setText(f"Files in “{name}”" if name else "Files")
        self._folder = folder
        self._files = tuple(ordered(files))
        self._fill()

    def _fill(self) -> None:
        shown = [info for info in self._files if is_problem(info)] if self.only_problems.isChecked() else list(self._files)
        problems = sum(1 for info in self._files if is_problem(info))
        self.table.setUpdatesEnabled(False)
        self.table.setRowCount(0)
        self.table.setRowCount(min(len(shown), SHOWN_ROWS))
        for row, info in enumerate(shown[:SHOWN_ROWS]):
            cells = (self._relative(info.path), file_state_words(info.state),
                     str(info.chunks) if info.state == "indexed" else "–", info.reason)
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(str(info.path) if column == 0 else text)
                if column == 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, column, item)
        self.table.setUpdatesEnabled(True)
        if self.table.rowCount():
            self.table.resizeColumnToContents(0)
            self.table.setColumnWidth(0, min(self.table.columnWidth(0), 360))
        counted = f"{len(self._files)} files" if len(self._files) != 1 else "1 file"
        unread = f" · {problems} unreadable" if problems else ""
        cut = f" · the first {SHOWN_ROWS} shown" if len(shown) > SHOWN_ROWS else ""
        self.summary.setText(f"{counted}{unread}{cut}" if self._files else "")

    def _relative(self, path: Path) -> str:
        if self._folder is not None:
            try:
                return str(path.relative_to(self._folder))
            except ValueError:
                pass
        return str(path)

    def shown_paths(self) -> list[str]:
        """The File column, top to bottom (for tests and the window's own checks)."""
        items = (self.table.item(row, 0) for row in range(self.table.rowCount()))
        return [item.text() for item in items if item is not None]
