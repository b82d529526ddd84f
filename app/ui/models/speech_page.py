"""Models → Speech: the speech-to-text models dictation listens with and the voices answers are read with, those
that ship and those the catalog offers, each with how it would run here; download, remove, or use one."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QHBoxLayout, QHeaderView, QLabel, QPushButton, QSplitter, QTextBrowser, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

from app.core.units import human_size
from app.hardware.fit import Verdict
from app.hardware.speech_fit import SpeechFit, SpeechVerdict
from app.service.events import SpeechRow, SpeechState
from app.ui.state.fit_verdict import UNKNOWN_FIT_WORDS, verdict_icon

if TYPE_CHECKING:
    from app.service.doors.models import LibraryDoor
    from app.ui.state.adapter import ServiceAdapter

_KINDS = {"transcription": "Speech to text", "voice": "Voice"}
_STATES = {SpeechState.SHIPPED: "Ships with Kestrel", SpeechState.DOWNLOADED: "Downloaded",
           SpeechState.OFFERED: "Not downloaded", SpeechState.SYSTEM: "Part of Windows"}
# Windows makes a Windows voice's speech itself: Kestrel has no measure of its own for how it runs.
WINDOWS_FIT_WORDS = "Windows' own"
_VERDICTS = {SpeechVerdict.GOOD: ("Runs well", Verdict.RUNS_WELL), SpeechVerdict.SLOW: ("Slow", Verdict.RUNS_SLOWLY),
             SpeechVerdict.TOO_SLOW: ("Too slow", Verdict.WONT_FIT), SpeechVerdict.TOO_BIG: ("Too big", Verdict.WONT_FIT)}
INTRO = ("Dictation and voice mode listen with a speech-to-text model; answers are read aloud with a voice. "
         "Kestrel ships Whisper tiny.en and the voice Joe, and downloads these others from Hugging Face on your "
         "word, each file checked by its SHA-256.")
WINDOWS_INTRO = " Windows' own voices are here too; Windows' Settings → Time & language → Speech adds more."


class SpeechPage(QWidget):
    """The list, the chosen row's details and its actions. downloadStarted: switch to the downloads page."""

    downloadStarted = Signal()
    NAME, KIND, LANGUAGES, SIZE, FIT, STATE = range(6)

    def __init__(self, adapter: ServiceAdapter, library: LibraryDoor, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.adapter = adapter
        self.library = library
        self.rows: tuple[SpeechRow, ...] = ()
        from app.voice.synthesis.windows_voices import ON_WINDOWS
        intro = QLabel(INTRO + (WINDOWS_INTRO if ON_WINDOWS else ""), self)
        intro.setWordWrap(True)
        self.tree = QTreeWidget(self)
        self.tree.setObjectName("speechModels")
        self.tree.setAccessibleName("Speech models and voices")
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)  # a Windows voice's row has no verdict icon: no shorter row for it
        self.tree.setHeaderLabels(["Name", "Kind", "Languages", "Size", "On this computer", "State"])
        header = self.tree.header()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.about = QTextBrowser(self)
        self.about.setObjectName("speechDetails")
        self.about.setOpenLinks(False)
        self.download_button = QPushButton("&Download", self)
        self.remove_button = QPushButton("&Remove", self)
        self.use_button = QPushButton("&Use", self)
        buttons = QHBoxLayout()
        for button in (self.download_button, self.use_button, self.remove_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        side = QWidget(self)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(0, 0, 0, 0)
        side_layout.addWidget(self.about, 1)
        side_layout.addLayout(buttons)
        # The list above its details: six columns need the page's whole width (at 200% too), and fourteen rows
        # fit above a few lines of details.
        splitter = QSplitter(Qt.Orientation.Vertical, self)
        splitter.addWidget(self.tree)
        splitter.addWidget(side)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(splitter, 1)
        self.tree.currentItemChanged.connect(lambda *_: self.show_selected())
        self.download_button.clicked.connect(self.download)
        self.remove_button.clicked.connect(self.remove)
        self.use_button.clicked.connect(self.use)
        adapter.speechListed.connect(self.set_rows)
        self.show_selected()

    def refresh(self) -> None:
        self.adapter.spawn(self.library.speech_refresh())

    def set_rows(self, rows: tuple[SpeechRow, ...]) -> None:
        chosen = self.selected()
        self.rows = rows
        self.tree.clear()
        for row in rows:
            words, verdict = _VERDICTS[row.fit.verdict] if row.fit is not None else (
                WINDOWS_FIT_WORDS if row.state is SpeechState.SYSTEM else UNKNOWN_FIT_WORDS, None)
            state = _STATES[row.state] + (" · in use" if row.in_use else "")
            item = QTreeWidgetItem([row.title, _KINDS.get(row.kind, row.kind), row.languages, _size(row), words,
                                    state])
            item.setData(self.NAME, Qt.ItemDataRole.UserRole, row.id)
            item.setTextAlignment(self.SIZE, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if verdict is not None:
                item.setIcon(self.FIT, verdict_icon(verdict))
            if row.fit is not None:
                item.setToolTip(self.FIT, row.fit.words)
            self.tree.addTopLevelItem(item)
            if chosen is not None and row.id == chosen.id:
                self.tree.setCurrentItem(item)
        self.show_selected()

    def selected(self) -> SpeechRow | None:
        item = self.tree.currentItem()
        wanted = item.data(self.NAME, Qt.ItemDataRole.UserRole) if item is not None else None
        return next((row for row in self.rows if row.id == wanted), None)

    def show_selected(self) -> None:
        row = self.selected()
        self.download_button.setEnabled(row is not None and row.downloadable and row.state is SpeechState.OFFERED)
        self.remove_button.setEnabled(row is not None and row.downloadable and row.state is SpeechState.DOWNLOADED)
        usable = row is not None and row.state is not SpeechState.OFFERED and not row.in_use
        self.use_button.setEnabled(usable)
        if row is None:
            self.use_button.setText("&Use")
            self.about.setText("Choose a model or a voice to see what it is, whose it is and how it would run here.")
            return
        self.use_button.setText("&Use for dictation" if row.kind == "transcription" else "&Use for reading aloud")
        self.about.setHtml(details_html(row))

    def download(self) -> None:
        row = self.selected()
        if row is not None:
            self.library.speech_download(row.id)
            self.downloadStarted.emit()

    def remove(self) -> None:
        row = self.selected()
        if row is not None:
            self.adapter.spawn(self.library.speech_remove(row.id))

    def use(self) -> None:
        row = self.selected()
        if row is not None:
            self.adapter.spawn(self.library.speech_use(row.id, row.kind))


def details_html(row: SpeechRow) -> str:
    """What the chosen row is: its words, how it would run here, whose it is and where it comes from."""
    fit = _fit_line(row.fit) if row.state is not SpeechState.SYSTEM else (
        "Windows makes its speech: Kestrel has not measured how fast it speaks here.")
    used = {"transcription": "Dictation and voice mode listen with it.",
            "voice": "Answers are read aloud with it."}.get(row.kind, "") if row.in_use else ""
    parts = [f"<h3>{html.escape(row.title)}</h3>", f"<p>{html.escape(row.description)}</p>",
             f"<p><b>{html.escape(_STATES[row.state])}</b> · {html.escape(_size(row))} · "
             f"{html.escape(row.languages)}. {html.escape(used)}</p>",
             f"<p>{html.escape(fit)}</p>",
             f"<p><b>Licence:</b> {html.escape(row.license)}</p>",
             f"<p><b>From:</b> {html.escape(row.source)}</p>"]
    return "".join(parts)


def _size(row: SpeechRow) -> str:
    return "—" if row.state is SpeechState.SYSTEM else human_size(row.size)


def _fit_line(fit: SpeechFit | None) -> str:
    if fit is None:
        return "How it would run here is not known yet: Kestrel has not read this computer's hardware."
    return f"{fit.words} Memory: about {human_size(fit.memory_bytes)}."
