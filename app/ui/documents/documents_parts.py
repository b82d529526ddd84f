"""Parts of the Documents window: the collections table, the empty page, the progress row and the name question."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QProgressBar,
                               QPushButton, QTableWidget, QVBoxLayout, QWidget)

from app.service.events import CollectionInfo, IndexingProgress
from app.ui.common import icons
from app.ui.common.text_room import elides_on_purpose, fit_title
from app.ui.documents.documents_words import EMPTY, empty_detail, is_paused, progress_words, state_words

COLUMNS = ("Name", "Folder", "Files", "Last indexed", "State")


def collections_table(parent: QWidget) -> QTableWidget:
    """A row per collection, a whole row selected at a time; Tab leaves it."""
    table = QTableWidget(0, len(COLUMNS), parent)
    table.setObjectName("documentsCollections")
    table.setHorizontalHeaderLabels(COLUMNS)
    table.verticalHeader().hide()
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
    table.setSelectionMode(QTableWidget.SelectionMode.SingleSelection)
    table.setWordWrap(False)
    table.setTabKeyNavigation(False)
    table.setAccessibleName("Collections")
    table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # a long folder keeps its end: the folder's own name
    elides_on_purpose(table, 1)  # ...and each cell's tooltip shows it whole
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)  # a few rows: cheap to measure
    header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
    # Three collections without scrolling, even at 200% where the file list would take the room.
    table.setMinimumHeight(table.verticalHeader().defaultSectionSize() * 3
                           + table.horizontalHeader().sizeHint().height() + 2 * table.frameWidth())
    return table


class EmptyPage(QWidget):
    """What the window shows before any folder is added: one clear action, `add_first`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.mark = QLabel(self)
        self.mark.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._draw_mark()
        title = QLabel(EMPTY, self)
        title.setObjectName("documentsEmpty")
        title.setWordWrap(True)
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        font = title.font()
        font.setPointSizeF(font.pointSizeF() * 1.25)
        font.setBold(True)
        title.setFont(font)
        detail = QLabel(empty_detail(), self)
        detail.setWordWrap(True)
        detail.setAlignment(Qt.AlignmentFlag.AlignCenter)
        # A measure read at a glance, not one line the window's width with a word left over; fixed,
        # since a wrapped label a layout may narrow is given the height of its widest line (Qt).
        detail.setFixedWidth(detail.fontMetrics().averageCharWidth() * 64)
        detail.setMinimumHeight(detail.heightForWidth(detail.width()))  # a stacked page does not ask for it
        self.add_first = QPushButton("&Add a folder…", self)
        icons.themed(self.add_first, "new-folder")
        self.add_first.setDefault(True)
        button_row = QHBoxLayout()
        button_row.addStretch(1)
        button_row.addWidget(self.add_first)
        button_row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        layout.addWidget(self.mark)
        layout.addWidget(title)
        layout.addWidget(detail, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addSpacing(8)
        layout.addLayout(button_row)
        layout.addStretch(2)

    def _draw_mark(self) -> None:
        self.mark.setPixmap(icons.icon("folder", icons.ROLE.PlaceholderText).pixmap(48, 48))

    def changeEvent(self, event: QEvent) -> None:  # Override QWidget.changeEvent.
        if event.type() == QEvent.Type.PaletteChange:
            self._draw_mark()  # drawn in the theme's colours: drawn again when the theme changes
        super().changeEvent(event)


class ProgressRow(QWidget):
    """The bar, its words ("120 of 860 files · about 2 min left", or why it waits) and Pause/Resume."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bar = QProgressBar(self)
        self.bar.setTextVisible(False)
        self.words = QLabel(self)
        self.words.setObjectName("documentsProgress")
        self.words.setWordWrap(True)
        self.pause = QPushButton("&Pause", self)
        self.paused = False
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        words = QVBoxLayout()
        words.addWidget(self.bar)
        words.addWidget(self.words)
        row.addLayout(words, 1)
        row.addWidget(self.pause, 0, Qt.AlignmentFlag.AlignTop)

    def show_state(self, shown: CollectionInfo | None, progress: IndexingProgress | None, paused: bool) -> None:
        """The progress of collection `shown` (None: none is busy; hidden unless paused)."""
        self.paused = paused
        self.pause.setText("Res&ume" if paused else "&Pause")
        self.pause.setToolTip("Go on indexing" if paused else "Hold indexing until you resume it")
        self.setVisible(shown is not None or paused)
        if shown is None:  # held with nothing to do now: what comes (a rescan's finds) waits too
            self.bar.setRange(0, 1)
            self.bar.setValue(0)
            self.words.setText("Paused: changed files are read once you resume")
            return
        if progress is None:  # busy, how far not said yet: a bar that moves, or a still one while held
            self.bar.setRange(0, 1 if is_paused(shown.state) else 0)
            self.words.setText(f"{shown.name}: {state_words(shown)}")
            return
        self.bar.setRange(0, max(progress.total, 0))
        self.bar.setValue(min(progress.done, progress.total))
        self.words.setText(progress_words(progress))


class NameDialog(QDialog):
    """Add folder…'s second question: the collection's name, the folder's own offered.

    A dialog of its own, not QInputDialog: that one sets its width from its contents when
    shown, too narrow for its title ("Name th… llection" in the title bar)."""

    def __init__(self, parent: QWidget, default: str) -> None:
        super().__init__(parent)
        self.setWindowTitle("Name the collection")
        self.edit = QLineEdit(default, self)
        self.edit.selectAll()
        label = QLabel("&Name (chats list it by this name):", self)
        label.setBuddy(self.edit)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(label)
        layout.addWidget(self.edit)
        layout.addWidget(buttons)
        fit_title(self)

    def textValue(self) -> str:
        return self.edit.text()


def name_dialog(parent: QWidget, default: str) -> NameDialog:
    return NameDialog(parent, default)
