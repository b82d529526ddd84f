"""The Documents window's line about search by meaning: which embedding model makes the vectors, or how to get one."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QWidget

from app.library.installed import InstalledModel
from app.ui import icons
from app.ui.documents_words import NO_MODEL, NONE_CHOSEN

CHOOSE = "Choose a model…"


class EmbeddingLine(QWidget):
    """"Search by meaning: off — install an embedding model…" with a button to the models,
    or the chosen model with a picker among the installed embedding models.

    Parts tests reach for: `words`, `get_model` (shown while none is installed), `picker`
    (shown once one is). Signals: modelsRequested (open the model manager), modelChosen(the id
    of the installed model picked).
    """

    modelsRequested = Signal()
    modelChosen = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._filling = False
        self.words = QLabel(NO_MODEL, self)
        self.words.setObjectName("documentsEmbedding")
        self.words.setWordWrap(True)
        self.get_model = QPushButton("&Get an embedding model…", self)
        icons.themed(self.get_model, "models")
        self.get_model.setToolTip("Open the models window to download or add an embedding model")
        self.get_model.clicked.connect(self.modelsRequested)
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

    def show_choice(self, chosen: str | None, installed: Sequence[InstalledModel]) -> None:
        """Say which model is chosen (None: none) among the installed embedding models.

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
        title = next((model.title or model.id for model in installed if model.id == chosen), chosen)
        if chosen is not None:
            self.words.setText(f"Search by meaning: on, with {title}")
        else:
            self.words.setText(NONE_CHOSEN if installed else NO_MODEL)
        self.get_model.setVisible(not installed)
        self.picker.setVisible(bool(installed) or chosen is not None)

    def _picked(self, index: int) -> None:
        chosen = self.picker.itemData(index) if index >= 0 else None
        if not self._filling and chosen is not None:
            self.modelChosen.emit(chosen)
