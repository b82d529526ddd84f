"""The Documents window's line about search by meaning: which embedding model makes the vectors, or how to get one."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QWidget

from app.core.units import human_size
from app.library.catalog import CatalogEntry
from app.library.installed import InstalledModel
from app.service.events import DownloadItem, DownloadState
from app.ui.common import icons
from app.ui.documents.documents_words import NO_MODEL, NONE_CHOSEN

CHOOSE = "Choose a model…"
_UNDER_WAY = frozenset({DownloadState.QUEUED, DownloadState.RUNNING, DownloadState.PAUSED, DownloadState.VERIFYING})


def offer_words(entry: CatalogEntry) -> str:
    """"Search by meaning: off — install an embedding model (all-MiniLM-L6-v2, 25.0 MB)"."""
    size = f", {human_size(entry.size)}" if entry.size else ""
    return f"Search by meaning: off — install an embedding model ({entry.name}{size})"


def download_words(entry: CatalogEntry, item: DownloadItem) -> str:
    """The line while the offered model downloads, or after its download failed."""
    if item.state is DownloadState.FAILED:
        return f"Search by meaning: off — the download of {entry.name} failed: {item.message or 'try again.'}"
    if item.state is DownloadState.PAUSED:
        return f"Search by meaning: the download of {entry.name} is paused (Models window)"
    if item.state is DownloadState.VERIFYING:
        return f"Search by meaning: checking the downloaded {entry.name}…"
    share = f" {item.done * 100 // item.total}%" if item.total else ""
    return f"Search by meaning: downloading {entry.name}…{share}"


class EmbeddingLine(QWidget):
    """"Search by meaning: off — install an embedding model (all-MiniLM-L6-v2, 25.0 MB)" with a
    button that downloads the catalog's embedding model (or, without one, opens the models
    window), or the chosen model with a picker among the installed embedding models.

    Parts tests reach for: `words`, `get_model` (shown while none is installed), `picker`
    (shown once one is). Signals: modelsRequested (open the model manager), downloadRequested
    (the CatalogEntry offered), modelChosen (the id of the installed model picked).
    """

    modelsRequested = Signal()
    downloadRequested = Signal(object)
    modelChosen = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._filling = False
        self._offer: CatalogEntry | None = None
        self.words = QLabel(NO_MODEL, self)
        self.words.setObjectName("documentsEmbedding")
        self.words.setWordWrap(True)
        self.get_model = QPushButton("&Get an embedding model…", self)
        self.get_model.clicked.connect(self._get)
        self.picker = QComboBox(self)
        self.picker.setObjectName("documentsEmbeddingPicker")
        self.picker.setToolTip("The embedding model that makes the vectors search by meaning uses")
        self.picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.picker.currentIndexChanged.connect(self._picked)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.words, 1)
        row.addWidget(self.get_model)
        row.addWidget(self.picker)

    def show_choice(self, chosen: str | None, installed: Sequence[InstalledModel], offer: CatalogEntry | None = None,
                    download: DownloadItem | None = None) -> None:
        """Say which model is chosen (None: none) among the installed embedding models; with
        none installed, offer the catalog's (`offer`, downloading as `download` says).

        There is no "off" to pick: the service takes None as "the oldest installed one" (the
        CLI's rule), so while none is chosen the picker starts on a prompt that chooses nothing."""
        self._filling = True
        self.picker.clear()
        if chosen is None:
            self.picker.addItem(CHOOSE, None)
        for model in installed:
            self.picker.addItem(model.title or model.id, model.id)
        if chosen is not None and chosen not in [model.id for model in installed]:
            self.picker.addItem(f"{chosen} (not installed)", chosen)
        self.picker.setCurrentIndex(max(0, self.picker.findData(chosen)) if chosen is not None else 0)
        self._filling = False
        self.picker.setVisible(bool(installed) or chosen is not None)
        self.get_model.setVisible(not installed)
        self._offer = offer
        title = next((model.title or model.id for model in installed if model.id == chosen), chosen)
        if chosen is not None:
            self.words.setText(f"Search by meaning: on, with {title}")
        elif installed:
            self.words.setText(NONE_CHOSEN)
        elif offer is not None and download is not None and download.state is not DownloadState.CANCELLED:
            self.words.setText(download_words(offer, download))
        else:
            self.words.setText(offer_words(offer) if offer is not None else NO_MODEL)
        under_way = download is not None and download.state in _UNDER_WAY
        self.get_model.setEnabled(not under_way)
        if offer is None:
            self.get_model.setText("&Get an embedding model…")
            icons.themed(self.get_model, "models")
            self.get_model.setToolTip("Open the models window to download or add an embedding model")
        else:
            self.get_model.setText("Downloading…" if under_way else "&Download it")
            icons.themed(self.get_model, "download")
            self.get_model.setToolTip(f"Download {offer.name} from the Kestrel catalog; search by meaning "
                                      "uses it once it is in")

    def _get(self) -> None:
        if self._offer is not None:
            self.downloadRequested.emit(self._offer)
        else:
            self.modelsRequested.emit()

    def _picked(self, index: int) -> None:
        chosen = self.picker.itemData(index) if index >= 0 else None
        if not self._filling and chosen is not None:
            self.modelChosen.emit(chosen)
