"""The model manager's downloads: their item model, their progress bars, and the page with Pause, Resume and Cancel."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtWidgets import (QApplication, QHBoxLayout, QHeaderView, QPushButton, QStyle, QStyledItemDelegate,
                               QStyleOptionProgressBar, QStyleOptionViewItem, QVBoxLayout, QWidget)

from app.core.units import human_size
from app.ui.model_items import ROW_ROLES, ModelFilter, Roles, RowTableModel, selected_row, table

if TYPE_CHECKING:
    from app.ui.adapter import ControllerAdapter

DOWNLOAD_STATES: dict[str, str] = {"queued": "Waiting", "running": "Downloading", "paused": "Paused",
                                   "verifying": "Checking", "done": "Done", "failed": "Failed",
                                   "cancelled": "Cancelled"}
# Download states in which each button does something.
_PAUSABLE = ("queued", "running")
_RESUMABLE = ("paused", "failed")
_CANCELLABLE = ("queued", "running", "paused", "verifying", "failed")


class DownloadsModel(RowTableModel):
    """Downloads (app.service.events.DownloadItem), in the order they started."""

    COLUMNS = ("Model", "Progress", "Speed", "Time left", "State", "Message")
    MODEL, PROGRESS, SPEED, LEFT, STATE, MESSAGE = range(6)

    def key(self, row: Any) -> object:
        return row.id

    def cell(self, row: Any, column: int, role: int) -> Any:
        if role == Roles.SORT:
            return row.done if column == self.PROGRESS else self._text(row, column).lower()
        if role in ROW_ROLES:
            return {Roles.ID: row.id, Roles.ROW: row, Roles.STATE: row.state, Roles.FRACTION: fraction(row),
                    Roles.SEARCH: row.title.lower()}.get(Roles(role))
        if role == Qt.ItemDataRole.ToolTipRole and column == self.MESSAGE:
            return row.message or None
        return self._text(row, column) if role == Qt.ItemDataRole.DisplayRole else None

    def _text(self, row: Any, column: int) -> str:
        running = row.state == "running"
        if column == self.MODEL:
            return row.title
        if column == self.PROGRESS:
            return progress_text(row.done, row.total)
        if column == self.SPEED:
            return f"{human_size(int(row.bytes_per_second))}/s" if running and row.bytes_per_second else ""
        if column == self.LEFT:
            return duration_text(row.seconds_left) if running and row.seconds_left is not None else ""
        if column == self.STATE:
            return DOWNLOAD_STATES.get(row.state, row.state)
        return row.message or ""


class ProgressDelegate(QStyledItemDelegate):
    """Draws a download's progress as a bar with its words over it."""

    def paint(self, painter, option: QStyleOptionViewItem,  # Override QStyledItemDelegate.paint.
              index: QModelIndex | QPersistentModelIndex) -> None:
        share = index.data(Roles.FRACTION)
        if share is None:
            super().paint(painter, option, index)
            return
        bar = QStyleOptionProgressBar()
        bar.rect = option.rect.adjusted(2, 3, -2, -3)
        bar.minimum, bar.maximum = (0, 0) if share < 0 else (0, 1000)
        bar.progress = max(0, int(share * 1000))
        bar.text = index.data() or ""
        bar.textVisible = True
        # Qt 6 reads a bar's direction from this flag; without it Fusion draws it upright.
        bar.state = option.state | QStyle.StateFlag.State_Horizontal
        bar.palette = option.palette
        style = option.widget.style() if option.widget else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ProgressBar, bar, painter, option.widget)


class DownloadsPage(QWidget):
    """Downloads with their progress, and Pause, Resume and Cancel for the selected one."""

    def __init__(self, adapter: ControllerAdapter, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.adapter = adapter
        self.filter = ModelFilter(self)
        self.filter.setSourceModel(adapter.downloads)
        self.view = table(self, self.filter, "downloads")
        self.view.setItemDelegateForColumn(DownloadsModel.PROGRESS, ProgressDelegate(self.view))
        self.view.horizontalHeader().setSectionResizeMode(DownloadsModel.PROGRESS, QHeaderView.ResizeMode.Fixed)
        self.view.setColumnWidth(DownloadsModel.PROGRESS, 260)
        self.pause_button = QPushButton("&Pause", self)
        self.resume_button = QPushButton("Res&ume", self)
        self.cancel_button = QPushButton("&Cancel download", self)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for button in (self.pause_button, self.resume_button, self.cancel_button):
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.view, 1)
        layout.addLayout(buttons)
        self.pause_button.clicked.connect(lambda: self._act("pause"))
        self.resume_button.clicked.connect(lambda: self._act("resume"))
        self.cancel_button.clicked.connect(lambda: self._act("cancel"))
        self.view.selectionModel().selectionChanged.connect(lambda *_: self.show_selected())
        adapter.downloads.dataChanged.connect(lambda *_: self.show_selected())
        adapter.downloads.rowsInserted.connect(self._select_newest)
        self.show_selected()

    def show_selected(self) -> None:
        item = selected_row(self.view)
        state = item.state if item is not None else ""
        self.pause_button.setEnabled(state in _PAUSABLE)
        self.resume_button.setEnabled(state in _RESUMABLE)
        self.cancel_button.setEnabled(state in _CANCELLABLE)

    def _select_newest(self, _parent, _first: int, last: int) -> None:
        index = self.filter.mapFromSource(self.adapter.downloads.index(last, 0))
        if index.isValid():
            self.view.selectRow(index.row())

    def _act(self, what: str) -> None:
        item = selected_row(self.view)
        queue = self.adapter.controller.downloads
        if item is None or queue is None:
            return
        result = getattr(queue, what)(item.id)
        if asyncio.iscoroutine(result):
            self.adapter.spawn(result)


def fraction(item: Any) -> float:
    """How much of a download is in; -1.0 while one of unknown size is moving (a busy bar)."""
    if not item.total:
        return 1.0 if item.state == "done" else -1.0 if item.state in ("running", "verifying") else 0.0
    return min(1.0, item.done / item.total)


def progress_text(done: int, total: int | None) -> str:
    if not total:
        return human_size(done) if done else ""
    return f"{done * 100 // total}% · {human_size(done)} of {human_size(total)}"


def duration_text(seconds: float) -> str:
    """Time left as a person says it: "40 s", "3 min 20 s", "1 h 5 min"."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
