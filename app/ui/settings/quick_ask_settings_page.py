"""The Settings dialog's "Quick ask" page: the global shortcut, what quick ask keeps, and starting at sign-in."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QKeySequenceEdit, QLabel, QPushButton, QSizePolicy,
                               QStyle, QVBoxLayout, QWidget)

from app.core import autostart
from app.core.autostart import AutostartError, SignInEntry
from app.core.quick_ask_settings import DEFAULT_SHORTCUT, shortcut_problem
from app.core.settings import Settings
from app.core.units import human_size
from app.library.installed import InstalledModel
from app.service.library_events import ModelRow
from app.ui.common.warning_row import WarningRow

Spawn = Callable[[Coroutine[Any, Any, Any]], Any]
_PORTABLE = QKeySequence.SequenceFormat.PortableText


def ready_cost_words(rows: Sequence[ModelRow], model: InstalledModel | None) -> str:
    """What keeping the model loaded costs, from what the window knows: the loaded model's memory as the
    library estimates it, else the size of the model's file (the model in use, or the default)."""
    row = next((r for r in rows if r.is_loaded), None) or next(
        (r for r in rows if model is not None and r.model.id == model.id), None) or next(
        (r for r in rows if r.is_default), None)
    if row is not None and row.fit is not None:
        return (f"{row.model.title} takes about {human_size(row.fit.need.total)} of memory, "
                "which stays in use while Kestrel waits.")
    shown = row.model if row is not None else model
    if shown is not None and shown.size > 0:
        return (f"{shown.title} takes about {human_size(shown.size)} of memory (its file's size), "
                "which stays in use while Kestrel waits.")
    return "The model you use stays in memory while Kestrel waits."


class QuickAskSettingsPage(QWidget):
    """Quick ask's settings as controls; `value(settings)` gives them back over the dialog's settings.

    "Start Kestrel when I sign in" acts when it is ticked, off the UI thread (spawn: the window's
    ServiceAdapter.spawn; without it the box only changes the setting), and says here if the system
    refused. sign_in: where the entry is written (this machine's, when not given). The window shows
    the global shortcut's state with show_shortcut_status.
    """

    def __init__(self, settings: Settings, parent: QWidget | None = None, *, spawn: Spawn | None = None,
                 sign_in: SignInEntry | None = None, model_memory: str = "") -> None:
        super().__init__(parent)
        quick = settings.quick_ask
        self._spawn = spawn
        self._sign_in = sign_in
        self._kept_shortcut = quick.shortcut
        # What the system has now, for Cancel to put back: the dialog's settings say what was saved.
        self._sign_in_at_open = settings.start_at_sign_in
        self._sign_in_now = settings.start_at_sign_in
        self._applying = False
        self._cancelled = False
        self.enabled = self._box("Turn &on quick ask", quick.enabled,
                                 "A shortcut opens a small Kestrel window over whatever you are doing. While "
                                 "quick ask is on, closing the main window keeps Kestrel in the tray.")
        self._shortcut_row(quick.shortcut)
        self.shortcut_status = QLabel("", self)
        self.shortcut_status.setWordWrap(True)
        self.shortcut_status.hide()
        self.shortcut_warning = WarningRow("", self)
        self.shortcut_warning.hide()
        self.save_chats = self._box("Keep quick-ask chats in my c&hat list", quick.save_chats,
                                    "Off, quick questions and their answers are never written to the history.")
        self.keep_model_ready = self._box("Keep the model loaded so quick ask ans&wers at once",
                                          quick.keep_model_ready,
                                          "Off, the model is unloaded after the idle time set on the first page, "
                                          "and a quick question then waits while it loads again.")
        self.memory_note = QLabel(model_memory or ready_cost_words((), None), self)
        self.memory_note.setWordWrap(True)
        self.memory_note.setObjectName("quickAskMemoryNote")
        self.start_at_sign_in = self._box("&Start Kestrel when I sign in", settings.start_at_sign_in,
                                          "Kestrel starts in the tray, ready for quick ask, without opening its "
                                          "window.")
        self.sign_in_note = QLabel("", self)
        self.sign_in_note.setWordWrap(True)
        self.sign_in_note.hide()
        self.sign_in_warning = WarningRow("", self)
        self.sign_in_warning.hide()
        self._lay_out()
        self.enabled.toggled.connect(self._follow_enabled)
        self._follow_enabled(quick.enabled)
        self.start_at_sign_in.toggled.connect(self._sign_in_toggled)

    def _box(self, text: str, checked: bool, tip: str) -> QCheckBox:
        box = QCheckBox(text, self)
        box.setChecked(checked)
        box.setToolTip(tip)
        return box

    def _shortcut_row(self, shortcut: str) -> None:
        self.shortcut = QKeySequenceEdit(QKeySequence.fromString(shortcut, _PORTABLE), self)
        self.shortcut.setMaximumSequenceLength(1)  # one chord: a global shortcut is never a sequence
        self.shortcut.setToolTip("Click here and press the keys together, such as Ctrl+Alt+Space.")
        self.shortcut.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.shortcut.keySequenceChanged.connect(self._shortcut_pressed)
        # A press into a full field empties it first; what it shows after is always the one kept.
        self.shortcut.editingFinished.connect(lambda: self._show_shortcut(self._kept_shortcut))
        self.clear_shortcut = QPushButton("C&lear", self)
        self.clear_shortcut.setToolTip("No shortcut: bind “kestrel ask” in your desktop's own keyboard settings "
                                       "instead.")
        self.clear_shortcut.clicked.connect(self._clear_shortcut)
        self.reset_shortcut = QPushButton(f"&Reset to {DEFAULT_SHORTCUT}", self)
        self.reset_shortcut.clicked.connect(lambda: self._set_shortcut(DEFAULT_SHORTCUT))
        self.shortcut_problem = WarningRow("", self)
        self.shortcut_problem.hide()

    def _lay_out(self) -> None:
        # One column, not a form: a wrapped label in a form row that appears later keeps the height of
        # more lines than it shows.
        intro = QLabel("Quick ask opens a small Kestrel over whatever you are doing: press the shortcut, type, "
                       "and the answer comes in that window. “kestrel ask” in a terminal opens it too.", self)
        intro.setWordWrap(True)
        label = QLabel("Short&cut", self)
        label.setBuddy(self.shortcut)
        keys = QHBoxLayout()
        keys.addWidget(label)
        keys.addWidget(self.shortcut, 1)
        keys.addWidget(self.clear_shortcut)
        keys.addWidget(self.reset_shortcut)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.enabled)
        layout.addLayout(keys)
        for row in (self.shortcut_problem, self.shortcut_status, self.shortcut_warning, self.save_chats,
                    self._with_note(self.keep_model_ready, self.memory_note), self.start_at_sign_in,
                    self.sign_in_note, self.sign_in_warning):
            layout.addWidget(row)
        layout.addStretch(1)

    def _with_note(self, box: QCheckBox, note: QLabel) -> QWidget:
        """box with note under its text, as one row: a wrapped label alone in a form row is given the
        height of more lines than it shows."""
        pair = QWidget(self)
        column = QVBoxLayout(pair)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        style = box.style()
        indent = (style.pixelMetric(QStyle.PixelMetric.PM_IndicatorWidth, None, box)
                  + style.pixelMetric(QStyle.PixelMetric.PM_CheckBoxLabelSpacing, None, box))
        note.setContentsMargins(indent, 0, 0, 0)
        column.addWidget(box)
        column.addWidget(note)
        return pair

    # --- the shortcut ------------------------------------------------------------------------

    def shortcut_text(self) -> str:
        """The shortcut as settings.json keeps it (Qt's portable text; "" for none)."""
        return self._kept_shortcut

    def _shortcut_pressed(self, sequence: QKeySequence) -> None:
        if sequence.isEmpty():
            return  # the field starting over at a key press; "none" is the Clear button
        text = sequence.toString(_PORTABLE)
        problem = shortcut_problem(text)
        if problem is not None:
            self._say_shortcut_problem(f"Not changed: {problem}")
            self._show_shortcut(self._kept_shortcut)  # the field keeps the last good one
            return
        self._kept_shortcut = text
        self._say_shortcut_problem("")

    def _set_shortcut(self, text: str) -> None:
        self._kept_shortcut = text
        self._show_shortcut(text)
        self._say_shortcut_problem("")

    def _clear_shortcut(self) -> None:
        self._set_shortcut("")
        self._say_shortcut_problem("No shortcut: quick ask opens from the tray's “Ask…” or from “kestrel ask”, "
                                   "which your desktop's keyboard settings can bind to any keys.")

    def _show_shortcut(self, text: str) -> None:
        self.shortcut.blockSignals(True)
        self.shortcut.setKeySequence(QKeySequence.fromString(text, _PORTABLE))
        self.shortcut.blockSignals(False)

    def _say_shortcut_problem(self, words: str) -> None:
        self.shortcut_problem.text.setText(words)
        self.shortcut_problem.setVisible(bool(words))

    def show_shortcut_status(self, held: bool, words: str) -> None:
        """The global shortcut's state as the window's GlobalShortcut says it (statusChanged)."""
        try:
            self.shortcut_status.setText(words if held else "")
            self.shortcut_status.setVisible(held and bool(words))
            self.shortcut_warning.text.setText("" if held else words)
            self.shortcut_warning.setVisible(not held and bool(words))
        except RuntimeError:
            pass  # the dialog was closed meanwhile

    def _follow_enabled(self, on: bool) -> None:
        for control in (self.shortcut, self.clear_shortcut, self.reset_shortcut, self.save_chats,
                        self.keep_model_ready):
            control.setEnabled(on)

    # --- starting at sign-in -------------------------------------------------------------------

    def _sign_in_toggled(self, on: bool) -> None:
        if self._spawn is None:
            return
        self.start_at_sign_in.setEnabled(False)  # one change at a time
        self._applying = True
        self._say_sign_in("Adding Kestrel to what starts when you sign in…" if on else
                          "Taking Kestrel out of what starts when you sign in…", False)
        self._spawn(self._apply_sign_in(on))

    async def _apply_sign_in(self, on: bool) -> None:
        try:
            await asyncio.to_thread(self._write_sign_in, on)
        except AutostartError as refused:
            self._after_sign_in(not on, str(refused), True)
        else:
            self._sign_in_now = on
            self._after_sign_in(on, "Kestrel will start in the tray when you sign in." if on else
                                "Kestrel will not start when you sign in.", False)
        finally:
            self._applying = False
        if self._cancelled:  # Cancel came while this was written
            self._put_back_if_changed()

    def _write_sign_in(self, on: bool) -> None:
        """On a worker thread: write or remove the entry (the registry or a file)."""
        entry = self._sign_in if self._sign_in is not None else autostart.sign_in_entry()
        if on:
            entry.enable(autostart.sign_in_command())
        else:
            entry.disable()

    def _after_sign_in(self, on: bool, words: str, refused: bool) -> None:
        try:
            self.start_at_sign_in.blockSignals(True)
            self.start_at_sign_in.setChecked(on)
            self.start_at_sign_in.blockSignals(False)
            self.start_at_sign_in.setEnabled(True)
            self._say_sign_in(words, refused)
        except RuntimeError:
            pass  # the dialog was closed meanwhile

    def _say_sign_in(self, words: str, refused: bool) -> None:
        self.sign_in_note.setText("" if refused else words)
        self.sign_in_note.setVisible(not refused)
        self.sign_in_warning.text.setText(words if refused else "")
        self.sign_in_warning.setVisible(refused)

    def put_back_sign_in(self) -> None:
        """After Cancel: the entry as it was when the dialog opened (the setting is not saved)."""
        self._cancelled = True
        if not self._applying:
            self._put_back_if_changed()

    def _put_back_if_changed(self) -> None:
        if self._spawn is not None and self._sign_in_now != self._sign_in_at_open:
            self._spawn(self._put_back(self._sign_in_at_open))

    async def _put_back(self, on: bool) -> None:
        try:
            await asyncio.to_thread(self._write_sign_in, on)
        except AutostartError:
            # The dialog is gone, so there is nowhere to say it; the entry was written a moment ago
            # and the next change of the setting writes it again.
            return

    # --- the value -------------------------------------------------------------------------------

    def value(self, settings: Settings) -> Settings:
        """settings with this page's choices (validated)."""
        quick = dataclasses.replace(settings.quick_ask, enabled=self.enabled.isChecked(),
                                    shortcut=self.shortcut_text(), save_chats=self.save_chats.isChecked(),
                                    keep_model_ready=self.keep_model_ready.isChecked())
        return dataclasses.replace(settings, quick_ask=quick.validated(),
                                   start_at_sign_in=self.start_at_sign_in.isChecked())

