"""About Kestrel: its version, its promise, where its data is kept, its starter model, and the licences of what it
ships and of the speech models and voices the person downloaded."""

from __future__ import annotations

import functools
import json
import platform
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QRect, QSize, Qt, QUrl, qVersion
from PySide6.QtGui import QDesktopServices, QPalette, QPixmap, QResizeEvent
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QGridLayout, QHBoxLayout, QHeaderView, QLabel, QPushButton,
                               QStyle, QToolButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from app import __version__
from app.core.paths import DataPaths
from app.core.resources import resource_path
from app.library.starter import STARTER_CARD_URL, STARTER_LICENSE, STARTER_NAME, STARTER_PUBLISHER, STARTER_TITLE
from app.service.events import SpeechRow, SpeechState
from app.ui.common import icons

# The starter is the model people judge the app by: say what it is, whose, and on what terms.
STARTER_WORDS = (f"{STARTER_NAME}, published by {STARTER_PUBLISHER} under the {STARTER_LICENSE} licence "
                 f"({STARTER_CARD_URL.removeprefix('https://')}). Kestrel sets it up at first start when its "
                 f"starter packages are installed (\"{STARTER_TITLE}\" in the model list), and it runs on this "
                 "computer like any other model.")
PROMISE = ("An offline AI assistant: language models run on this computer, and what you type is never sent "
           "anywhere. Kestrel goes online only when you start a download.")


@dataclass(frozen=True)
class BundledPart:
    """One component the app ships and its licence, as resources/licenses.json records it."""

    name: str
    purpose: str
    license: str
    url: str
    note: str = ""


@functools.cache
def bundled_parts(path: Path | None = None) -> tuple[str, tuple[BundledPart, ...]]:
    """Kestrel's own licence and each bundled part's, from licenses.json.

    The file, not importlib.metadata: a frozen app does not carry its packages' metadata.
    """
    data = json.loads((path or resource_path("licenses.json")).read_text(encoding="utf-8"))
    parts = tuple(BundledPart(part["name"], part["for"], part["license"], part.get("url", ""), part.get("note", ""))
                  for part in data["components"])
    return data["kestrel"]["license"], parts


class AboutDialog(QDialog):
    """About Kestrel (Help → About Kestrel).

    open_url: how a folder is opened (QDesktopServices.openUrl); tests pass their own, so
    that nothing is opened. `note` says when a folder could not be opened.
    """

    def __init__(self, paths: DataPaths, parent: QWidget | None = None, *,
                 open_url: Callable[[QUrl], bool] = QDesktopServices.openUrl) -> None:
        super().__init__(parent)
        self.setWindowTitle("About Kestrel")
        self._paths = paths
        self._open_url = open_url
        own_license, parts = bundled_parts()
        self.version = QLabel(f"Version {__version__}", self)
        self.version.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.licenses = _parts_table(parts, self)
        self._shipped_rows = len(parts)
        self.note = QLabel("", self)
        self.note.setWordWrap(True)
        self.note.hide()
        self.starter = QLabel(STARTER_WORDS, self)
        self.starter.setWordWrap(True)
        self.starter.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.open_data = QPushButton("&Open data folder", self)
        icons.themed(self.open_data, "folder")
        self.open_data.clicked.connect(lambda: self.open_folder(paths.data))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        buttons.addButton(self.open_data, QDialogButtonBox.ButtonRole.ActionRole)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 20, 20, 14)
        layout.setSpacing(10)
        layout.addLayout(self._heading(own_license))
        layout.addSpacing(6)
        layout.addWidget(_heading_label("Where your data is kept", self))
        layout.addLayout(self._folders())
        layout.addWidget(self.note)
        layout.addSpacing(6)
        layout.addWidget(_heading_label("The starter model", self))
        layout.addWidget(self.starter)
        layout.addSpacing(6)
        layout.addWidget(_heading_label("What Kestrel ships, and its licences", self))
        layout.addWidget(self.licenses, 1)
        layout.addWidget(buttons)
        self.resize(760, 680)

    def open_folder(self, folder: Path) -> None:
        """Show folder in the file manager; say so when that cannot be done."""
        url = QUrl.fromLocalFile(str(folder))
        if self._open_url(url):
            self.note.hide()
            return
        self.note.setText(f"Could not open {folder}. Open it in your file manager, or copy the path from here.")
        self.note.show()

    def set_speech_rows(self, rows: tuple[SpeechRow, ...]) -> None:
        """Add the speech models and voices downloaded in Models → Speech to the licences (a voice's terms are its
        own: Ryan's is non-commercial); those that ship are in licenses.json already. Called with Models → Speech's
        rows whenever they are listed, so a download or a Remove shows the next time they are."""
        table = self.licenses
        while table.topLevelItemCount() > self._shipped_rows:
            table.takeTopLevelItem(self._shipped_rows)
        for row in rows:
            if row.state is SpeechState.DOWNLOADED:
                what = "a voice" if row.kind == "voice" else "speech-to-text"
                _add_part(table, BundledPart(row.title, f"{what}, downloaded by you in Models → Speech", row.license,
                                             "", row.source))
        _fit_rows(table)

    def _heading(self, own_license: str) -> QHBoxLayout:
        logo = QLabel(self)
        ratio = self.devicePixelRatioF()
        pixmap = QPixmap(str(resource_path("icons", "kestrel-128.png")))
        if not pixmap.isNull():
            pixmap = pixmap.scaled(QSize(64, 64) * ratio, Qt.AspectRatioMode.KeepAspectRatio,
                                   Qt.TransformationMode.SmoothTransformation)
            pixmap.setDevicePixelRatio(ratio)
            logo.setPixmap(pixmap)
        title = QLabel("Kestrel", self)
        font = title.font()
        font.setPointSizeF(font.pointSizeF() * 1.6)
        font.setBold(True)
        title.setFont(font)
        details = QLabel(f"{own_license} licence · Qt {qVersion()} · Python {platform.python_version()}", self)
        details.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        promise = QLabel(PROMISE, self)
        promise.setWordWrap(True)
        text = QVBoxLayout()
        text.setSpacing(4)
        for widget in (title, self.version, details, promise):
            text.addWidget(widget)
        row = QHBoxLayout()
        row.setSpacing(16)
        row.addWidget(logo, 0, Qt.AlignmentFlag.AlignTop)
        row.addLayout(text, 1)
        return row

    def _folders(self) -> QGridLayout:
        paths = self._paths
        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        grid.setVerticalSpacing(4)
        self.folder_rows: dict[str, Path] = {}
        for row, (name, path, folder) in enumerate((
                ("Chats", paths.history_db, paths.data), ("Models", paths.models, paths.models),
                ("Settings", paths.settings_file, paths.config), ("Quick reopen of chats", paths.cache, paths.cache),
                ("Logs", paths.logs, paths.logs))):
            self.folder_rows[name] = folder
            label = QLabel(name, self)
            label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
            where = QLabel(str(path), self)
            where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            where.setObjectName(f"path:{name}")
            button = QToolButton(self)
            button.setAutoRaise(True)
            button.setToolTip(f"Open this folder ({name.lower()}) in the file manager")
            button.setObjectName(f"open:{name}")
            icons.themed(button, "folder")
            button.clicked.connect(functools.partial(self.open_folder, folder))
            grid.addWidget(label, row, 0)
            grid.addWidget(where, row, 1)
            grid.addWidget(button, row, 2)
        grid.setColumnStretch(3, 1)  # the open buttons stay beside their paths
        return grid


def _parts_table(parts: tuple[BundledPart, ...], parent: QWidget) -> QTreeWidget:
    """A row per bundled part. Licence and purpose wrap at their column's width (a long
    licence expression, NumPy's five, must be read whole, not elided); rows grow to fit."""
    table = _PartsTable(parent)
    table.setObjectName("bundledParts")
    table.setHeaderLabels(["Part", "Licence", "Used for"])
    table.setRootIsDecorated(False)
    table.setAlternatingRowColors(True)
    table.setSelectionMode(QTreeWidget.SelectionMode.NoSelection)
    table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    table.setWordWrap(True)
    table.setUniformRowHeights(False)
    for part in parts:
        _add_part(table, part)
    metrics = table.fontMetrics()
    pad = 2 * metrics.averageCharWidth()
    header = table.header()
    header.setStretchLastSection(True)
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)  # names are short: one line each
    header.setSectionResizeMode(1, QHeaderView.ResizeMode.Interactive)
    widest = max((metrics.horizontalAdvance(part.license) for part in parts), default=0)
    header.resizeSection(1, min(widest, 26 * metrics.averageCharWidth()) + pad)
    # A tree sizes its rows from one line of each cell: each row is measured here, at its
    # columns' widths, and again whenever the licence or purpose column changes width.
    header.sectionResized.connect(lambda *_: _fit_rows(table))  # column 0 follows its contents: no loop
    _fit_rows(table)
    return table


def _add_part(table: QTreeWidget, part: BundledPart) -> None:
    item = QTreeWidgetItem([part.name, part.license, part.purpose])
    tip = "\n".join(filter(None, (f"{part.name}: {part.license}", part.url, part.note)))
    for column in range(3):
        item.setToolTip(column, tip)
    table.addTopLevelItem(item)


class _PartsTable(QTreeWidget):
    """The parts' table, whose rows are measured again when it changes width (the last
    column stretches with it, without a sectionResized for it)."""

    def resizeEvent(self, event: QResizeEvent) -> None:  # Override QTreeWidget.resizeEvent.
        super().resizeEvent(event)
        _fit_rows(self)


def _fit_rows(table: QTreeWidget) -> None:
    """Each row as tall as its most wrapped cell at the column's width."""
    metrics = table.fontMetrics()
    margin = 2 * (table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1)
    pad = 8
    for row in range(table.topLevelItemCount()):
        item = table.topLevelItem(row)
        if item is None:
            continue
        tallest = metrics.lineSpacing()
        for column in (1, 2):
            room = QRect(0, 0, max(table.header().sectionSize(column) - margin, 1), 100_000)
            tallest = max(tallest, metrics.boundingRect(room, int(Qt.TextFlag.TextWordWrap), item.text(column)).height())
        item.setSizeHint(0, QSize(metrics.horizontalAdvance(item.text(0)) + margin + pad, tallest + pad))


def _heading_label(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    font = label.font()
    font.setBold(True)
    font.setPointSizeF(font.pointSizeF() * 1.1)
    label.setFont(font)
    return label
