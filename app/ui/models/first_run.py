"""The first-run offer in the empty chat: one recommended model that fits this machine, one Download button, and a Cancel while it (or the starter) is being set up."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from app.core.units import human_size
from app.hardware.fit import FitEstimate
from app.service.events import DownloadItem, DownloadState, ModelState
from app.ui.state.download_items import DOWNLOAD_STATE_WORDS, fraction, progress_text
from app.ui.state.fit_verdict import verdict_tooltip, verdict_words

if TYPE_CHECKING:
    from app.service.doors.models import LibraryDoor, ModelDoor
    from app.ui.state.adapter import ServiceAdapter

OFFER_WIDTH = 600
# States after which the offer's button can start the download again.
_ENDED: frozenset[DownloadState] = frozenset({DownloadState.FAILED, DownloadState.CANCELLED})
# States in which the download is still under way: its progress is shown.
_UNDER_WAY: frozenset[DownloadState] = frozenset({DownloadState.RUNNING, DownloadState.PAUSED, DownloadState.QUEUED,
                                                  DownloadState.VERIFYING})


class FirstRunOffer(QFrame):
    """Shows library.recommended(): its name, size, why it fits, and a Download button
    whose progress appears in place, with a Cancel while it is under way. With nothing to
    offer it says so in one line and offers the model manager instead. While the starter
    model is being set up (assembled from its packages) it shows that, with a Cancel.

    Signals: downloadRequested(CatalogEntry), cancelRequested(download id),
    setupCancelRequested, managerRequested.
    """

    downloadRequested = Signal(object)
    cancelRequested = Signal(object)
    setupCancelRequested = Signal()
    managerRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("firstRunOffer")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        # Wrapped labels ask for little width; the offer reads best as a card this wide.
        self.setFixedWidth(OFFER_WIDTH)
        self._row: Any = None
        self._download_id: object = None
        self._adapter: ServiceAdapter | None = None
        self._model: ModelDoor | None = None
        self._library: LibraryDoor | None = None
        self._catalog_asked = False
        self.heading = QLabel(self)
        self.heading.setObjectName("offerHeading")
        self.name = QLabel(self)
        self.reason = QLabel(self)
        self.description = QLabel(self)
        for label in (self.heading, self.name, self.reason, self.description):
            label.setWordWrap(True)
            label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.download_button = QPushButton("Download", self)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Stop and delete what has arrived")
        self.cancel_button.hide()
        self.manager_button = QPushButton("Open the model manager…", self)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1000)
        self.state = QLabel(self)
        self.state.setWordWrap(True)
        self.state.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._setup = False  # showing the starter's setup, not the offer
        self.download_button.clicked.connect(self._download)
        self.cancel_button.clicked.connect(self._cancel)
        self.manager_button.clicked.connect(self.managerRequested)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.download_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.manager_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        for widget in (self.heading, self.name, self.reason, self.description):
            layout.addWidget(widget)
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        layout.addWidget(self.state)
        self.show_offer(None)

    def follow(self, adapter: ServiceAdapter, model: ModelDoor, library: LibraryDoor) -> None:
        """Keep in step with the service: its catalog, its downloads, its model."""
        self._adapter, self._model, self._library = adapter, model, library
        adapter.downloadChanged.connect(self.show_download)
        adapter.catalogListed.connect(self.refresh)
        adapter.modelStateChanged.connect(self._list_catalog_once)
        adapter.modelStateChanged.connect(self.refresh)
        adapter.setupProgress.connect(self.show_setup)
        self.downloadRequested.connect(library.download)
        self.cancelRequested.connect(self._cancel_download)
        self.setupCancelRequested.connect(model.cancel_setup)
        self.refresh()

    def wanted(self) -> bool:
        """No model yet, or only the offline starter (once it is settled)."""
        if self._model is None:
            return False
        return offer_wanted(self._model) and self._model.model_state not in (ModelState.LOADING,
                                                                             ModelState.INSTALLING)

    def setting_up(self) -> bool:
        """The starter model is being set up (the model state is INSTALLING)."""
        return self._model is not None and self._model.model_state == ModelState.INSTALLING

    def refresh(self) -> None:
        """Shown while wanted, once the catalog has been listed; or while the starter is set up."""
        if self.setting_up():
            self.setVisible(True)
            if not self._setup:
                self.show_setup("Setting up the starter model", 0, 0)
            return
        listed = self._adapter is not None and self._adapter.catalog.rowCount() > 0
        shown = self.wanted() and listed
        self.setVisible(shown)
        if self._setup:
            self._setup = False
            self._row = None  # the offer is laid out afresh below
            self.show_offer(None)
        if shown and self._library is not None:
            self.show_offer(self._library.recommended())

    def show_setup(self, what: str, done: int, total: int) -> None:
        """The starter model is being assembled: what, how far, and a Cancel."""
        if self._adapter is not None and not self.setting_up():
            return  # an import's progress: the status line shows it
        self._setup = True
        for widget in (self.name, self.reason, self.description, self.download_button, self.manager_button):
            widget.hide()
        self.heading.setText(f"<b>{_escape(what)}…</b>")
        self.heading.show()
        self.progress.show()
        if total > 0:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(min(done, total) * 1000 / total))
            self.state.setText(progress_text(done, total))
        else:
            self.progress.setRange(0, 0)
            self.state.setText("")
        self.state.setVisible(bool(self.state.text()))
        self.cancel_button.show()
        self.cancel_button.setEnabled(True)

    def _list_catalog_once(self) -> None:
        """Once the model is settled (the engine free), list the catalog for the offer."""
        if self.wanted() and not self._catalog_asked and self._adapter is not None and self._library is not None:
            self._catalog_asked = True
            self._adapter.spawn(self._library.refresh())

    @property
    def offered(self) -> Any:
        """The CatalogRow on offer, or None."""
        return self._row

    def show_offer(self, row: Any) -> None:
        """Offer this CatalogRow (None: the catalog has nothing that fits here)."""
        if row is not None and self._row is not None and row.entry.id == self._row.entry.id \
                and self._download_id is not None:
            self._row = row  # a fresh listing of the model being downloaded: keep its progress
            return
        self._row = row
        self._download_id = None
        self.progress.hide()
        self.state.hide()
        self.cancel_button.hide()
        self.manager_button.show()
        self.description.setVisible(row is not None)
        self.name.setVisible(row is not None)
        self.reason.setVisible(row is not None)
        self.download_button.setVisible(row is not None)
        self.download_button.setEnabled(True)
        if row is None:
            self.heading.setText("The catalog has no model that fits this machine; the model manager "
                                 "can add one you have.")
            return
        entry = row.entry
        size = human_size(entry.size) if entry.size else "size from the server"
        self.heading.setText("<b>Get a model that chats well</b>")
        self.name.setText(f"<b>{_escape(entry.name)}</b> · {_escape(entry.publisher)} · {size}")
        self.reason.setText(getattr(row, "reason", "") or _reason(row.fit))
        self.reason.setToolTip(verdict_tooltip(row.fit))
        self.description.setText(_escape(entry.description))
        self.download_button.setText(f"Download ({size})" if entry.size else "Download")

    def show_download(self, item: DownloadItem) -> None:
        """A download moved on; shown if it is the offered model's.

        A cancelled one clears the card back to its offer and says "Cancelled." once.
        """
        if self._row is None or self._setup or not self._is_offered(item):
            return
        if item.state == DownloadState.CANCELLED:
            self._cleared(item)
            return
        self._download_id = item.id
        self.state.show()
        share = fraction(item)
        self.progress.setVisible(item.state not in _ENDED)
        if share < 0:
            self.progress.setRange(0, 0)  # the total is not known yet: a busy bar
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(share * 1000))
        self.state.setText(_download_words(item))
        self.cancel_button.setVisible(item.state in _UNDER_WAY)
        self.cancel_button.setEnabled(True)
        self.download_button.setVisible(item.state not in _UNDER_WAY)
        self.download_button.setEnabled(item.state in _ENDED)
        self.download_button.setText("Try again" if item.state in _ENDED else "Download")

    def _cleared(self, item: DownloadItem) -> None:
        """After a cancel: the offer as it was, its Download button back, "Cancelled." once."""
        row, self._row = self._row, None
        self.show_offer(row)
        self.state.setText(f"{DOWNLOAD_STATE_WORDS[item.state]}." + (f" {item.message}" if item.message else ""))
        self.state.show()

    def _cancel(self) -> None:
        self.cancel_button.setEnabled(False)  # once: the state that follows shows what became of it
        if self._setup:
            self.setupCancelRequested.emit()
        elif self._download_id is not None:
            self.cancelRequested.emit(self._download_id)

    def _cancel_download(self, download_id: object) -> None:
        queue = self._library.downloads if self._library is not None else None
        if queue is not None:
            queue.cancel(str(download_id))

    def _is_offered(self, item: DownloadItem) -> bool:
        entry = self._row.entry
        return (item.id == self._download_id or getattr(item, "catalog_id", None) == entry.id
                or item.title == entry.name)

    def _download(self) -> None:
        if self._row is None:
            return
        self.download_button.setEnabled(False)
        self.manager_button.hide()
        self.progress.setRange(0, 0)
        self.progress.show()
        self.state.setText("Starting the download…")
        self.state.show()
        self.downloadRequested.emit(self._row.entry)


def _download_words(item: DownloadItem) -> str:
    """The state, how far, and what the download is doing or why it stopped."""
    if item.state == DownloadState.DONE:
        return "Downloaded: it is now the default model and is loading."
    words = DOWNLOAD_STATE_WORDS[item.state]
    if item.state == DownloadState.RUNNING and not item.done and item.message:
        return item.message  # "Connecting to huggingface.co…": before the first byte
    if item.state in _UNDER_WAY:
        amount = progress_text(item.done, item.total)
        words = f"{words} · {amount}" if amount else f"{words}…"
    return words + (f"\n{item.message}" if item.message else "")


def _reason(fit: FitEstimate | None) -> str:
    """Why it fits, in one line."""
    if fit is None:
        return "Whether it fits this machine is not known yet."
    return fit.summary if fit.summary else verdict_words(fit)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def offer_wanted(door: ModelDoor) -> bool:
    """No model yet, or only the offline starter: the empty chat offers a better one."""
    model = door.model
    return model is None or "starter" in model.source


STARTER_TEXT = ("You are trying Kestrel with its starter model: a small model that runs on any computer. "
                "Type below to try it, or get a larger model that answers better.")
