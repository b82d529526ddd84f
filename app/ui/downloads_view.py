"""The model manager's downloads page: progress bars, and Pause, Resume and Cancel for the selected download."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import QModelIndex, QPersistentModelIndex
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import (QApplication, QHBoxLayout, QHeaderView, QPushButton, QStyle, QStyledItemDelegate,
                               QStyleOptionProgressBar, QStyleOptionViewItem, QVBoxLayout, QWidget)

from app.ui.adapter import ControllerAdapter
from app.ui.download_items import CANCELLABLE, PAUSABLE, RESUMABLE, DownloadsModel
from app.ui.model_items import ModelFilter, Roles, selected_row, table


class ProgressDelegate(QStyledItemDelegate):
    """Draws a download's progress as a bar with its words over it."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,  # Override QStyledItemDelegate.paint.
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
        self.pause_button.setEnabled(item is not None and item.state in PAUSABLE)
        self.resume_button.setEnabled(item is not None and item.state in RESUMABLE)
        self.cancel_button.setEnabled(item is not None and item.state in CANCELLABLE)

    def _select_newest(self, _parent: QModelIndex, _first: int, last: int) -> None:
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
