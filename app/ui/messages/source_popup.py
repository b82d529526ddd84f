"""A source an answer was given, opened from its Sources row: the passage's text, and Open file at its place."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.core.attachments import SourceRef
from app.ui.state.message_words import source_label
from app.ui.common.text_room import fit_title


def source_url(source: SourceRef) -> QUrl:
    """The file's URL; a PDF's with #page=N, which Firefox, Chrome and Edge (and most PDF viewers
    that take a URL) open at that page; a viewer that does not opens it at its first page."""
    url = QUrl.fromLocalFile(source.path)
    if source.page is not None and source.path.lower().endswith(".pdf"):
        url.setFragment(f"page={source.page}")
    return url


def where_words(source: SourceRef, exists: bool) -> str:
    """The line above the passage: where it is, and what to do when the file is gone."""
    place = " · ".join(part for part in (f"page {source.page}" if source.page is not None else "",
                                          source.heading or "") if part)
    said = f"{source.path}{' · ' + place if place else ''}"
    if exists:
        return said
    return (f"{said}\nThe file is no longer there (moved, renamed or deleted): the text below is what "
            "the answer was given, as it was read then.")


class SourcePopup(QDialog):
    """The passage of one source as the model read it; Open file opens the file (a PDF at its page).

    `opener` opens a URL (QDesktopServices.openUrl; tests give their own).
    """

    def __init__(self, source: SourceRef, parent: QWidget | None = None,
                 opener: Callable[[QUrl], bool] = QDesktopServices.openUrl) -> None:
        super().__init__(parent)
        self.source = source
        self._opener = opener
        self.setObjectName("sourcePopup")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.setWindowTitle(f"Source {source_label(source)}")
        fit_title(self)
        exists = Path(source.path).is_file()
        self.where = QLabel(where_words(source, exists), self)
        self.where.setWordWrap(True)
        self.text = QPlainTextEdit(source.text, self)
        self.text.setReadOnly(True)
        self.text.setAccessibleName("The source's text")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.open_button = QPushButton("Open file", self)
        self.open_button.setEnabled(exists)
        self.open_button.setToolTip("Open the file in the program your computer uses for it"
                                    + (f", at page {source.page}" if source.page is not None else "")
                                    if exists else "The file is no longer there")
        buttons.addButton(self.open_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        self.open_button.clicked.connect(self.open_file)
        layout = QVBoxLayout(self)
        layout.addWidget(self.where)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.resize(560, 420)
        self.text.setFocus()

    def open_file(self) -> None:
        """Open the file at the source's place; a URL the system refuses is tried without its page."""
        url = source_url(self.source)
        if not self._opener(url) and url.hasFragment():
            self._opener(QUrl.fromLocalFile(self.source.path))
