"""The model manager's downloads page: a card per download with its progress, Pause or Resume, and Cancel."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QTimer, Signal
from PySide6.QtWidgets import QFrame, QGridLayout, QHBoxLayout, QProgressBar, QPushButton, QVBoxLayout, QWidget

from app.service.events import DownloadItem, DownloadState
from app.service.doors.models import LibraryDoor
from app.ui.state.adapter import ServiceAdapter
from app.ui.state.download_items import CANCELLABLE, PAUSABLE, RESUMABLE, WITH_BAR, fraction, message_line, status_line
from app.ui.models.manager_cards import CardList
from app.ui.models.model_card import ElidedLabel, wrapped
from app.ui.state.model_items import ModelFilter, Roles

# How long a cancelled download's card says "Cancelled" before it is cleared from the list.
CLEAR_CANCELLED_MS = 4000


class DownloadCard(QFrame):
    """One download: its name, a bar while it moves, one status line, what went wrong, and its buttons.

    Signals: requested(what, download id), what being "pause", "resume" or "cancel".
    """

    requested = Signal(str, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelCard")
        self.item: DownloadItem | None = None
        self.title = ElidedLabel(self)
        self.title.setObjectName("cardTitle")
        self.bar = QProgressBar(self)
        self.bar.setTextVisible(False)
        self.bar.setMaximumHeight(8)
        self.status = wrapped(self, "cardStatus")
        self.message = wrapped(self, "cardMuted")
        self.pause_button = QPushButton("Pause", self)
        self.resume_button = QPushButton("Resume", self)
        self.cancel_button = QPushButton("Cancel", self)
        for button in (self.pause_button, self.resume_button, self.cancel_button):
            button.setObjectName("secondaryAction")
        buttons = QHBoxLayout()
        buttons.setSpacing(6)
        for button in (self.pause_button, self.resume_button, self.cancel_button):
            buttons.addWidget(button)
        grid = QGridLayout(self)
        grid.setContentsMargins(12, 10, 12, 10)
        grid.setVerticalSpacing(4)
        grid.addWidget(self.title, 0, 0)
        grid.addLayout(buttons, 0, 1)
        grid.addWidget(self.bar, 1, 0, 1, 2)
        grid.addWidget(self.status, 2, 0, 1, 2)
        grid.addWidget(self.message, 3, 0, 1, 2)
        grid.setColumnStretch(0, 1)
        self.pause_button.clicked.connect(lambda: self._request("pause"))
        self.resume_button.clicked.connect(lambda: self._request("resume"))
        self.cancel_button.clicked.connect(lambda: self._request("cancel"))

    def show_item(self, item: DownloadItem) -> None:
        if item == self.item:
            return
        self.item = item
        self.title.set_full_text(item.title, item.source)
        self.setAccessibleName(item.title)
        share = fraction(item)
        self.bar.setVisible(item.state in WITH_BAR)
        self.bar.setRange(0, 0 if share < 0 else 1000)  # 0 to 0: a busy bar while the size is not known
        self.bar.setValue(max(0, int(share * 1000)))
        self.status.setText(status_line(item))
        message = message_line(item)
        self.message.setText(message)
        self.message.setVisible(bool(message))
        self.pause_button.setVisible(item.state in PAUSABLE)
        self.resume_button.setVisible(item.state in RESUMABLE)
        # Nothing arrived (it failed before the first byte): there is nothing to resume, only another try.
        self.resume_button.setText("Resume" if item.done > 0 else "Try again")
        self.cancel_button.setVisible(item.state in CANCELLABLE)

    def _request(self, what: str) -> None:
        if self.item is not None:
            self.requested.emit(what, self.item.id)


class DownloadsPage(QWidget):
    """Every download as a card, the newest scrolled into view; a cancelled one is cleared after a moment."""

    def __init__(self, adapter: ServiceAdapter, library: LibraryDoor, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.adapter = adapter
        self._library = library
        self.filter = ModelFilter(self)
        self.filter.setSourceModel(adapter.downloads)
        self.cards = CardList(self.filter, self._new_card, self._fill,
                              "No downloads. Get a model from the catalog to see it arrive here.", self)
        self.cards.setObjectName("downloads")
        self.cards.setAccessibleName("Downloads")
        self._clearing: set[str] = set()
        layout = QVBoxLayout(self)
        layout.addWidget(self.cards, 1)
        self.filter.rowsInserted.connect(self._show_newest)

    def _new_card(self, parent: QWidget) -> DownloadCard:
        card = DownloadCard(parent)
        card.requested.connect(self._act)
        return card

    def _fill(self, card: DownloadCard, item: DownloadItem) -> None:
        card.show_item(item)
        if item.state == DownloadState.CANCELLED and item.id not in self._clearing:
            self._clearing.add(item.id)
            QTimer.singleShot(CLEAR_CANCELLED_MS, self, lambda: self.clear(item.id))

    def clear(self, download_id: str) -> None:
        """Take a cancelled download's card away: it said "Cancelled", and there is nothing left to do with it."""
        self.filter.hide_key(download_id)

    def _show_newest(self, _parent: QModelIndex | QPersistentModelIndex, _first: int, last: int) -> None:
        key = str(self.filter.index(last, 0).data(Roles.ID))
        self.cards.ensureWidgetVisible(self.cards.card(key))

    def _act(self, what: str, download_id: str) -> None:
        queue = self._library.downloads
        if queue is None:
            return
        result = getattr(queue, what)(download_id)
        if asyncio.iscoroutine(result):
            self.adapter.spawn(result)
