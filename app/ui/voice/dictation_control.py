"""Drives dictation from the composer: the mic button and its shortcut, the listening bar, and the words put in the message box."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QToolButton, QWidget

from app.service.doors.voice import DictationDoor
from app.service.voice.dictation_events import (DictationAvailability, DictationEvent, DictationFinished,
                                                DictationHeard, DictationNotHeard, DictationSpeechStarted,
                                                DictationState, DictationStateChanged)
from app.ui.voice import dictation_words as said
from app.ui.voice.dictation_bar import DictationBar
from app.ui.voice.voice_mode_words import MIC_TIP as VOICE_MODE_TIP

# The meter follows the microphone's blocks (32 ms each).
LEVEL_EVERY_MS = 33
Spawn = Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]


class DictatingComposer(Protocol):
    """What dictation needs of the composer (app/ui/chat/composer.py), which holds the button and the bar."""

    mic_button: QToolButton
    dictation_bar: DictationBar

    def set_dictating(self, on: bool, tip: str) -> None: ...
    def insert_dictated(self, text: str) -> None: ...
    def send(self) -> None: ...


class DictationControl(QObject):
    """The composer's microphone. A press (or SHORTCUT) asks the service to start or stop and returns at
    once; the service's events (on this thread: the loop is Qt's) move the button and the bar; the words
    go in the message box where the cursor is, and are sent at once when the setting says so.

    Only a dictation this control started (`_own`) is shown and put in the box: voice mode's own listening
    (app/ui/voice/voice_mode_control.py) goes through the same service, and its words are voice mode's to
    send. While voice mode is on (set_voice_mode) the button and SHORTCUT are off and the bar is voice
    mode's; the meter follows whichever dictation has the microphone open."""

    def __init__(self, door: DictationDoor, composer: DictatingComposer, widget: QWidget, spawn: Spawn) -> None:
        super().__init__(widget)
        self._door = door
        self._composer = composer
        self.bar: DictationBar = composer.dictation_bar
        self.button = composer.mic_button
        self.shortcut = QShortcut(QKeySequence(said.SHORTCUT), widget)
        self.shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
        self.shortcut.activated.connect(self.press)
        self.button.clicked.connect(self.press)
        self.bar.closeRequested.connect(self._close_bar)
        self._own = False  # the dictation on now (or ending) was started here, by a press
        self._voice_mode = False
        self._meter = QTimer(self)
        self._meter.setInterval(LEVEL_EVERY_MS)
        self._meter.timeout.connect(self._show_level)
        unsubscribe = door.subscribe(self._hear)
        widget.destroyed.connect(lambda *_: unsubscribe())  # no event reaches a window that is gone
        composer.set_dictating(False, said.READY_TIP)
        spawn(self._check())

    def press(self) -> None:
        """The mic button or its shortcut: start or stop, without waiting for either (nothing while voice
        mode has the microphone)."""
        if self._voice_mode:
            return
        if self._door.state is DictationState.IDLE:
            self.bar.clear()
            self._own = True  # before the press: the service says OPENING before it returns
        elif not self._own:
            return  # voice mode's listening, still ending: not this button's to stop
        self._door.toggle()

    def set_voice_mode(self, on: bool) -> None:
        """Voice mode started or ended: the button and its shortcut are off while it is on (a dictation
        of this button's that is still ending puts its words in the box; the bar is voice mode's)."""
        self._voice_mode = on
        self.button.setEnabled(not on)
        self.shortcut.setEnabled(not on)
        self._show_button(self._door.state if self._own else DictationState.IDLE)

    async def _check(self) -> None:
        await self._door.check()
        if self._door.state is DictationState.IDLE:
            self._show_button(DictationState.IDLE)

    def _close_bar(self) -> None:
        if not self._voice_mode:  # in voice mode its close button ends voice mode (VoiceModeControl)
            self.bar.clear()

    def _hear(self, event: DictationEvent) -> None:
        if isinstance(event, DictationStateChanged):
            self._follow_level(event.state)
        if not self._own:
            return  # voice mode's listening: VoiceModeControl shows it
        if isinstance(event, DictationStateChanged):
            self._state_changed(event.state)
        elif self._voice_mode and not isinstance(event, DictationFinished):
            return
        elif isinstance(event, DictationSpeechStarted):
            self.bar.show_working(said.HEARING, microphone_open=True)
        elif isinstance(event, DictationHeard):
            self.bar.show_words(event.text)
        elif isinstance(event, DictationNotHeard):
            self.bar.show_working(said.not_heard_words(event.failure), microphone_open=True)
        elif isinstance(event, DictationFinished):
            self._finished(event)

    def _follow_level(self, state: DictationState) -> None:
        if state is DictationState.LISTENING:
            self._meter.start()
        else:
            self._meter.stop()

    def _state_changed(self, state: DictationState) -> None:
        self._show_button(state)
        if self._voice_mode:
            return
        if state is DictationState.OPENING:
            self.bar.show_working(said.OPENING, microphone_open=False)
        elif state is DictationState.LISTENING:
            self.bar.show_working(said.LISTENING, microphone_open=True)
        elif state is DictationState.FINISHING:
            self.bar.show_working(said.FINISHING, microphone_open=False)

    def _show_button(self, state: DictationState) -> None:
        if self._voice_mode:
            self._composer.set_dictating(False, VOICE_MODE_TIP)
            return
        availability = self._door.availability or DictationAvailability()
        tip = said.unavailable_tip(availability) if state is DictationState.IDLE else said.LISTENING_TIP
        self._composer.set_dictating(state is not DictationState.IDLE, tip)

    def _finished(self, finished: DictationFinished) -> None:
        self._own = False
        if finished.voice_mode:
            return  # voice mode's words: it sends them itself
        if finished.text:
            self._composer.insert_dictated(finished.text)
        if self._voice_mode:
            return  # the bar is voice mode's; the words wait in the box
        problem = said.finished_words(finished)
        if problem:
            self.bar.show_problem(problem)
        else:
            self.bar.clear()
        if finished.text and finished.send_at_once and finished.ended_well:
            self._composer.send()

    def _show_level(self) -> None:
        level = self._door.level
        self.bar.meter.set_level(level.rms_dbfs if level is not None else None)
