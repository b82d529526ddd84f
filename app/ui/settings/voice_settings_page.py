"""Settings' Voice page: what dictation does with its words, when it stops listening, and which microphone it opens."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.core.settings import Settings
from app.core.voice_settings import VoiceSettings

NOTE = ("Press the microphone beside Send (or Ctrl+Shift+Space) and speak: your words go in the message box. "
        "Speech is turned into text on this computer; nothing you say is saved or sent anywhere.")
DEFAULT_MICROPHONE = "The system's default"
NO_MICROPHONES = "No microphone was found. Plug one in, then open Settings again."
Microphones = Callable[[], Awaitable[tuple[str, ...]]]
Spawn = Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]


class VoiceSettingsPage(QWidget):
    """The voice group as controls; `value(settings)` gives settings with them. The microphone list is read
    (on a thread, by `microphones`) the first time the page is shown, never when Settings opens elsewhere:
    reading it starts the sound library."""

    def __init__(self, settings: VoiceSettings, parent: QWidget | None = None, *,
                 microphones: Microphones | None = None, spawn: Spawn | None = None) -> None:
        super().__init__(parent)
        self._microphones, self._spawn, self._listed = microphones, spawn, False
        note = QLabel(NOTE, self)
        note.setWordWrap(True)
        self.send_at_once = QCheckBox("Send dictated text at &once", self)
        self.send_at_once.setChecked(settings.send_at_once)
        self.send_at_once.setToolTip("Off: the words wait in the message box for you to read, edit and send.")
        self.stop_at_end = QCheckBox("Stop &listening when I stop speaking", self)
        self.stop_at_end.setChecked(settings.stop_at_end_of_speech)
        self.stop_at_end.setToolTip("Off: Kestrel listens until you press the microphone again, through pauses.")
        self.microphone = QComboBox(self)
        self.microphone.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.microphone.addItem(DEFAULT_MICROPHONE, None)
        if settings.microphone is not None:
            self.microphone.addItem(settings.microphone, settings.microphone)
            self.microphone.setCurrentIndex(1)
        self.microphone_note = QLabel(self)
        self.microphone_note.setWordWrap(True)
        self.microphone_note.hide()
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Micro&phone:", self.microphone)
        form.addRow("", self.microphone_note)
        layout = QVBoxLayout(self)
        layout.addWidget(note)
        layout.addSpacing(6)
        layout.addWidget(self.send_at_once)
        layout.addWidget(self.stop_at_end)
        layout.addSpacing(6)
        layout.addLayout(form)
        layout.addStretch(1)

    def value(self, settings: Settings) -> Settings:
        """`settings` with this page's voice settings."""
        voice = VoiceSettings(send_at_once=self.send_at_once.isChecked(),
                              stop_at_end_of_speech=self.stop_at_end.isChecked(),
                              microphone=self.microphone.currentData())
        return dataclasses.replace(settings, voice=voice)

    def list_microphones(self) -> None:
        """Fill the microphone list (once; called when the page is first shown)."""
        if self._listed or self._microphones is None or self._spawn is None:
            return
        self._listed = True
        self._spawn(self._fill(self._microphones))

    async def _fill(self, microphones: Microphones) -> None:
        names = await microphones()
        chosen = self.microphone.currentData()
        for name in names:
            if self.microphone.findData(name) < 0:
                self.microphone.addItem(name, name)
        self.microphone.setCurrentIndex(max(0, self.microphone.findData(chosen)))
        self.microphone_note.setText(NO_MICROPHONES)
        self.microphone_note.setVisible(not names)
