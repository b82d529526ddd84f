"""DictationDoor: the window's dictation (the mic button, its shortcut, the listening bar)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.service.voice.dictation_events import DictationAvailability, DictationState

if TYPE_CHECKING:
    from app.service.root import Service
    from app.voice.microphone import Level  # numpy comes with it: not imported when the window starts


class DictationDoor:
    """What the composer's microphone calls: `toggle` (a press: start when idle, else stop), `start`,
    `stop`, `check` (whether dictation can start here, found on a thread), `microphones` (the input
    devices' names, for Settings → Voice, read on a thread) and `subscribe` (dictation's
    events, on the loop: app/service/voice/dictation_events.py); `state`, `level` (the open microphone's
    loudness, None while closed) and `availability` (what check() found) are read as they are now.

    The calls are Dictation's own (app/service/voice/dictation_service.py), handed over as they are.
    """

    def __init__(self, service: Service) -> None:
        dictation = self._dictation = service.dictation
        self.toggle = dictation.toggle
        self.start = dictation.start
        self.stop = dictation.stop
        self.check = dictation.check
        self.microphones = dictation.microphones
        self.subscribe = dictation.subscribe

    @property
    def state(self) -> DictationState:
        return self._dictation.state

    @property
    def level(self) -> Level | None:
        return self._dictation.level

    @property
    def availability(self) -> DictationAvailability | None:
        return self._dictation.availability
