"""Drives voice mode from the window: its button beside the microphone, its menu item and shortcut, Escape, and the listening bar while it is on."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import QPlainTextEdit, QToolButton, QWidget

from app.service.doors.read_aloud import ReadAloudDoor
from app.service.doors.settings import SettingsDoor
from app.service.doors.voice import DictationDoor
from app.service.doors.voice_mode import VoiceModeDoor
from app.service.voice.dictation_events import (DictationEvent, DictationHeard, DictationNotHeard,
                                                DictationSpeechStarted, DictationState, DictationStateChanged)
from app.service.voice.read_aloud_events import ReadAloudEvent, ReadAloudState
from app.service.voice.voice_mode_events import (VoiceModeChanged, VoiceModeEnd, VoiceModeEnded, VoiceModeEvent,
                                                 VoiceModeState)
from app.ui.common import icons
from app.ui.voice import voice_mode_words as said
from app.ui.voice.dictation_bar import DictationBar
from app.ui.voice.dictation_control import DictationControl
from app.ui.voice.dictation_words import not_heard_words


class VoiceModeComposer(Protocol):
    """What voice mode needs of the composer (app/ui/chat/composer.py): its button, the bar, the box."""

    voice_mode_button: QToolButton
    dictation_bar: DictationBar

    @property
    def edit(self) -> QPlainTextEdit: ...

    def set_voice_mode(self, on: bool, tip: str) -> None: ...
    def insert_dictated(self, text: str) -> None: ...


class VoiceModeControl(QObject):
    """Voice mode in the window. The button, `action` (Chat → Voice mode, SHORTCUT) and the bar's close
    button ask the service to start or end it and return at once; voice mode's events (on this thread: the
    loop is Qt's) press the button in, take the mic button off (`dictation`) and fill the bar: voice mode's
    state in words, with the red dot and the meter exactly while the dictation door says the microphone is
    open (in THINKING and SPEAKING too, where speaking interrupts), and the words heard.

    Escape (`escape`, anywhere in the window) ends voice mode while it is on, which silences the voice too;
    meanwhile read-aloud's own Escape (`read_aloud_escape`, on the messages) is kept off, so the two never
    meet on one key (Qt would then run neither)."""

    def __init__(self, door: VoiceModeDoor, listening: DictationDoor, reading: ReadAloudDoor, settings: SettingsDoor,
                 composer: VoiceModeComposer, dictation: DictationControl, widget: QWidget, *,
                 read_aloud_escape: QShortcut) -> None:
        super().__init__(widget)
        self._door = door
        self._listening = listening
        self._reading = reading
        self._composer = composer
        self._dictation = dictation
        self._settings = settings
        self._read_aloud_escape = read_aloud_escape
        self.bar = composer.dictation_bar
        self.button = composer.voice_mode_button
        self._hearing = False  # the person's speech started and the utterance is not over
        self._heard = ""  # what was recognised of it
        self.action = QAction("&Voice mode", widget)
        self.action.setCheckable(True)
        self.action.setShortcut(QKeySequence(said.SHORTCUT))
        self.action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        icons.themed(self.action, "voice-mode", icons.ROLE.WindowText)
        self.action.triggered.connect(self.press)
        widget.addAction(self.action)  # the shortcut works with the menu bar hidden too
        self.escape = QShortcut(QKeySequence(Qt.Key.Key_Escape), widget)
        self.escape.setContext(Qt.ShortcutContext.WindowShortcut)
        self.escape.setEnabled(False)
        self.escape.activated.connect(door.stop)
        self.button.clicked.connect(self.press)
        self.bar.closeRequested.connect(self._close_bar)
        unsubscribe = [door.subscribe(self._hear), listening.subscribe(self._hear_dictation),
                       reading.subscribe(self._hear_reading)]
        widget.destroyed.connect(lambda *_: [stop() for stop in unsubscribe])  # no event reaches a window that is gone
        self._show_on(False)

    @property
    def on(self) -> bool:
        return self._door.state is not VoiceModeState.OFF

    def press(self) -> None:
        """The button, the menu item or the shortcut: start voice mode, or end it, without waiting."""
        if not self.on:
            self.bar.clear()  # a problem left from the last time
        self._door.toggle()
        self._show_on(self.on)  # at once, in case the press changed nothing (the button toggles itself)

    def _close_bar(self) -> None:
        if self.on:
            self._door.stop()

    # --- what it hears ----------------------------------------------------------------------------------

    def _hear(self, event: VoiceModeEvent) -> None:
        if isinstance(event, VoiceModeChanged):
            if event.state is VoiceModeState.OFF:
                self._show_on(False)
                self.bar.clear()
                return
            if event.state is not VoiceModeState.LISTENING:
                self._heard = ""  # sent (THINKING), or not to be (WAITING): the chat shows the message
            self._show_on(True)
            self._show_state()
        elif isinstance(event, VoiceModeEnded):
            self._ended(event)

    def _hear_dictation(self, event: DictationEvent) -> None:
        if not self.on:
            return
        if isinstance(event, DictationStateChanged):
            if event.state in (DictationState.IDLE, DictationState.OPENING):
                self._hearing = False
            if event.state is DictationState.OPENING:
                self._heard = ""
        elif isinstance(event, DictationSpeechStarted):
            self._hearing = True
        elif isinstance(event, DictationHeard):
            self._heard = event.text
        elif isinstance(event, DictationNotHeard):
            self._show_state(not_heard_words(event.failure))
            return
        self._show_state()

    def _hear_reading(self, event: ReadAloudEvent) -> None:
        """Read-aloud turns its Escape on with each reading: kept off while voice mode has Escape (this
        listener comes after read-aloud's own, subscribed first)."""
        if self.on:
            self._read_aloud_escape.setEnabled(False)

    # --- showing it -------------------------------------------------------------------------------------

    def _show_on(self, on: bool) -> None:
        self._composer.set_voice_mode(on, said.ON_TIP if on else said.READY_TIP)
        self.action.setChecked(on)
        self.escape.setEnabled(on)
        self._read_aloud_escape.setEnabled(not on and self._reading.state is not ReadAloudState.IDLE)
        self._dictation.set_voice_mode(on)
        if not on:
            self._hearing, self._heard = False, ""

    def _show_state(self, status: str = "") -> None:
        state, listening = self._door.state, self._listening.state
        if state is VoiceModeState.OFF:
            return
        status = status or said.status_words(state, listening, hearing=self._hearing, heard=bool(self._heard),
                                             interrupt=self._settings.settings.voice.interrupt_by_speaking)
        self.bar.show_voice_mode(status, microphone_open=listening is DictationState.LISTENING,
                                 close_tip=said.ON_TIP)
        self.bar.show_words(self._heard)

    def _ended(self, ended: VoiceModeEnded) -> None:
        """Voice mode ended by itself: why, in the bar until closed; words heard and not sent go in the box."""
        kept = ended.detail if ended.why is VoiceModeEnd.NOT_SENT else ""
        if ended.why is VoiceModeEnd.MICROPHONE and ended.dictation is not None:
            kept = ended.dictation.text  # a fault ended it mid-sentence: what was heard is not lost
        if kept.strip() and kept.strip() not in self._composer.edit.toPlainText():  # put back already (SendFailed)
            self._composer.insert_dictated(kept)
        words = said.ended_words(ended)
        if words:
            self.bar.show_problem(words)
        else:
            self.bar.clear()
