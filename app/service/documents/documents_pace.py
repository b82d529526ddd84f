"""When the documents worker holds (the user, an answer, power) and how fast its run goes: time left, events due."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from app.service.documents_events import hold_words

# A window redraws at 60 Hz: more progress than this is work for nobody.
PROGRESS_EVERY_S = 0.25
# The collections' counts (a query over every file row) are read again at most this often in a run.
_COUNTS_EVERY_S = 2.0
# The pace of a few files says nothing about the rest: no time left before this many.
_ESTIMATE_AFTER = 3


class Hold:
    """Why indexing waits, set from the event loop and read by the worker: the user's Pause
    first, then an answer streaming, then power saving (the words name the first that holds)."""

    def __init__(self, wake: threading.Event) -> None:
        self._wake = wake
        self.user = False
        self.answering = False
        self.saving = False
        self.battery = False

    def set(self, **flags: bool) -> None:
        for name, value in flags.items():
            setattr(self, name, value)
        self._wake.set()

    @property
    def held(self) -> bool:
        return self.user or self.answering or self.saving or self.battery

    def words(self) -> str:
        return hold_words(self.user, self.answering, self.saving, self.battery)


class Pace:
    """A run's pace, its time held left out, and when the next progress event is due."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        self.held_s = 0.0
        self._said = 0.0
        self._counted = clock()

    def left(self, done: int, total: int) -> float | None:
        if done < _ESTIMATE_AFTER:
            return None
        working = max(self._clock() - self._started - self.held_s, 1e-6)
        return working / done * max(total - done, 0)

    def due(self) -> bool:
        now = self._clock()
        if now - self._said < PROGRESS_EVERY_S:
            return False
        self._said = now
        return True

    def counts_due(self) -> bool:
        now = self._clock()
        if now - self._counted < _COUNTS_EVERY_S:
            return False
        self._counted = now
        return True
