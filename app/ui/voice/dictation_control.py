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
    go in the message box where the cursor is, and are sent at once when the setting says so."""

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
        self.bar.closeRequested.connect(self.bar.clear)
        self._meter = QTimer(self)
        self._meter.setInterval(LEVEL_EVERY_MS)
        self._meter.timeout.connect(self._show_level)
        unsubscribe = door.subscribe(self._hear)
        widget.destroyed.connect(lambda *_: unsubscribe())  # no event reaches a window that is gone
        composer.set_dictating(False, said.READY_TIP)
        spawn(self._check())

    def press(self) -> None:
        """The mic button or its shortcut: start or stop, without waiting for either."""
        if self._door.state is DictationState.IDLE:
            self.bar.clear()
        self._door.toggle()

    async def _check(self) -> None:
        availability = await self._door.check()
        if self._door.state is DictationState.IDLE:
            self._composer.set_dictating(False, said.unavailable_tip(availability))

    def _hear(self, event: DictationEvent) -> None:
        if isinstance(event, DictationStateChanged):
            self._state_changed(event.state)
        elif isinstance(event, DictationSpeechStarted):
            self.bar.show_working(said.HEARING, microphone_open=True)
        elif isinstance(event, DictationHeard):
            self.bar.show_words(event.text)
        elif isinstance(event, DictationNotHeard):
            self.bar.show_working(said.not_heard_words(event.failure), microphone_open=True)
        elif isinstance(event, DictationFinished):
            self._finished(event)

    def _state_changed(self, state: DictationState) -> None:
        listening = state is DictationState.LISTENING
        if listening:
            self._meter.start()
        else:
            self._meter.stop()
        if state is DictationState.OPENING:
            self.bar.show_working(said.OPENING, microphone_open=False)
        elif listening:
            self.bar.show_working(said.LISTENING, microphone_open=True)
        elif state is DictationState.FINISHING:
            self.bar.show_working(said.FINISHING, microphone_open=False)
        availability = self._door.availability or DictationAvailability()
        tip = said.unavailable_tip(availability) if state is DictationState.IDLE else said.LISTENING_TIP
        self._composer.set_dictating(state is not DictationState.IDLE, tip)

    def _finished(self, finished: DictationFinished) -> None:
        if finished.text:
            self._composer.insert_dictated(finished.text)
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
