"""The Documents window's file list: one collection's files, their state, and why each unreadable one was refused."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QRect, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QHeaderView, QLabel, QStyle, QStyledItemDelegate,
                               QStyleOptionViewItem, QTableView, QVBoxLayout, QWidget)

from app.service.events import FileInfo
from app.ui.common.text_room import elides_on_purpose

FILE_COLUMNS = ("File", "State", "Passages", "Note")
NOTE = 3
_FILE_STATES = {"pending": "Waiting to be read", "indexed": "Indexed", "unreadable": "Unreadable"}
_Index = QModelIndex | QPersistentModelIndex


def file_state_words(state: str) -> str:
    return _FILE_STATES.get(state, state.capitalize())


def is_problem(info: FileInfo) -> bool:
    """A file the reader refused: what "Only problems" keeps."""
    return info.state == "unreadable"


def ordered(files: Sequence[FileInfo]) -> list[FileInfo]:
    """Problems first (they are what someone opens this list for), then by path."""
    return sorted(files, key=lambda info: (not is_problem(info), str(info.path).lower()))


class FilesModel(QAbstractTableModel):
    """The rows a view asks for, made when asked: a collection of 10,000 files is put in the
    list in milliseconds, where a QTableWidget's items took 1.6 s on the UI thread."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: list[FileInfo] = []
        self._folder: Path | None = None

    def set_rows(self, rows: list[FileInfo], folder: Path | None) -> None:
        self.beginResetModel()
        self._rows, self._folder = rows, folder
        self.endResetModel()

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # Override QAbstractTableModel.
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # Override QAbstractTableModel.
        return 0 if parent.isValid() else len(FILE_COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> str | None:  # Override.
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return FILE_COLUMNS[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:  # Override.
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        info, column = self._rows[index.row()], index.column()
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            if column == 0:
                return str(info.path) if role == Qt.ItemDataRole.ToolTipRole else self._relative(info.path)
            if column == 1:
                return file_state_words(info.state)
            if column == 2:
                return str(info.chunks) if info.state == "indexed" else "–"
            return info.reason
        if role == Qt.ItemDataRole.TextAlignmentRole and column == 2:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _relative(self, path: Path) -> str:
        if self._folder is not None and path.is_relative_to(self._folder):
            return str(path.relative_to(self._folder))
        return str(path)

    def text(self, row: int, column: int) -> str:
        return str(self.data(self.index(row, column)) or "")


class WrappedNote(QStyledItemDelegate):
    """The Note column: a refusal's reason wraps onto more lines, as its advice (what to do)
    comes last and an elided reason loses it."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: _Index) -> None:  # Override.
        super().initStyleOption(option, index)
        option.features |= QStyleOptionViewItem.ViewItemFeature.WrapText
        option.textElideMode = Qt.TextElideMode.ElideRight


class FilesTable(QTableView):
    """The file list's view: its rows with a reason are measured again when it changes width
    (the Note column stretches with it, without a sectionResized for it)."""

    resized = Signal()

    def resizeEvent(self, event: QResizeEvent) -> None:  # Override QTableView.resizeEvent.
        super().resizeEvent(event)
        self.resized.emit()


class FilesPanel(QWidget):
    """The selected collection's files. Parts tests reach for: `heading`, `only_problems`,
    `table` (a view of `model`, one row per file shown), `summary` (how many, how many unreadable)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._files: tuple[FileInfo, ...] = ()
        self._name: str | None = None
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
        self.model = FilesModel(self)
        self.table = FilesTable(self)
        self.table.resized.connect(self._fit_note_rows)
        self.table.setObjectName("documentsFiles")
        self.table.setModel(self.model)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.setWordWrap(False)
        self.table.setTabKeyNavigation(False)  # Tab leaves the table: the window stays keyboard reachable
        self.table.setAccessibleName("Files")
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # a long path keeps its file name
        elides_on_purpose(self.table, 0)  # ...and shows it whole in its tooltip
        self.table.setItemDelegateForColumn(NOTE, WrappedNote(self.table))
        header = self.table.horizontalHeader()
        # Widths from the words, not ResizeToContents, which measures every row on each change.
        metrics = self.table.fontMetrics()
        pad = 3 * metrics.averageCharWidth()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.resizeSection(1, max(metrics.horizontalAdvance(words) for words in _FILE_STATES.values()) + pad)
        header.resizeSection(2, metrics.horizontalAdvance("Passages") + pad)
        header.setSectionResizeMode(NOTE, QHeaderView.ResizeMode.Stretch)
        header.sectionResized.connect(self._note_resized)
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
        """The files of collection `name` (None: none is selected), in the order `ordered()`
        gives, which the caller runs off the UI thread: it takes 0.13 s for 10,000 files."""
        self.heading.setText(f"Files in “{name}”" if name else "Files")
        another = name != self._name
        self._name, self._folder = name, folder
        self._files = tuple(files)
        self._fill()  # a reset keeps the scroll bar where it was: a list refilled while read stays put
        if another:
            self.table.scrollToTop()
            self._fit_file_column()

    def _fit_file_column(self) -> None:
        """The File column as wide as the paths at the top of the list need (measured on the
        first 200 rows, not all: a big collection is measured in no time), within 20 to 48
        characters; a longer path is elided and shown whole in its tooltip."""
        metrics = self.table.fontMetrics()
        rows = min(self.model.rowCount(), 200)
        widest = max((metrics.horizontalAdvance(self.model.text(row, 0)) for row in range(rows)), default=0)
        char = metrics.averageCharWidth()
        self.table.horizontalHeader().resizeSection(0, max(20 * char, min(widest + 2 * char, 48 * char)))

    def _fill(self) -> None:
        shown = [info for info in self._files if is_problem(info)] if self.only_problems.isChecked() else list(self._files)
        self.model.set_rows(shown, self._folder)
        self._fit_note_rows()
        problems = sum(1 for info in self._files if is_problem(info))
        counted = f"{len(self._files)} files" if len(self._files) != 1 else "1 file"
        unread = f" · {problems} unreadable" if problems else ""
        self.summary.setText(f"{counted}{unread}" if self._files else "")

    def _note_resized(self, column: int, _old: int, _new: int) -> None:
        if column == NOTE:
            self._fit_note_rows()

    def _fit_note_rows(self) -> None:
        """Each row with a reason as tall as its wrapped reason at the Note column's width.
        Only those rows are measured (files that were read have none): 10,000 rows stay quick."""
        table = self.table
        style, metrics = table.style(), table.fontMetrics()
        width = table.columnWidth(NOTE) - 2 * (style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin) + 1)
        default = table.verticalHeader().defaultSectionSize()
        padding = max(default - metrics.lineSpacing(), 0)
        for row in range(self.model.rowCount()):
            reason = self.model.text(row, NOTE)
            if reason:
                lines = metrics.boundingRect(QRect(0, 0, max(width, 1), 100_000), int(Qt.TextFlag.TextWordWrap),
                                             reason).height()
                table.setRowHeight(row, max(default, lines + padding))

    def shown_paths(self) -> list[str]:
        """The File column, top to bottom (for tests and the window's own checks)."""
        return [self.model.text(row, 0) for row in range(self.model.rowCount())]
