"""What a download reports while it runs: bytes, speed and time left."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

_WINDOW_S = 5.0      # speed is measured over the last few seconds, so it follows the network
_EVERY_S = 0.1       # at most ten reports a second: a view repaints no faster


@dataclass(frozen=True)
class DownloadProgress:
    """The unit as a whole: `done` counts parts on disk, so a resumed download starts above 0.

    total is None while a server has not said how big a file is; seconds_left is None
    until there is a speed and a total to divide. paused is True once the download has
    really paused (its part flushed, its connection closed).
    """

    file: str
    done: int
    total: int | None
    bytes_per_second: float
    seconds_left: float | None
    paused: bool = False


ProgressCallback = Callable[[DownloadProgress], None]


class SpeedMeter:
    """Bytes per second over a sliding window of the bytes this run received."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque()
        self._received = 0

    def add(self, count: int) -> None:
        now = self._clock()
        self._received += count
        self._samples.append((now, self._received))
        while len(self._samples) > 2 and now - self._samples[0][0] > _WINDOW_S:
            self._samples.popleft()

    def restart(self) -> None:
        """After a pause: the time spent waiting is not a slow network."""
        self._samples.clear()

    def speed(self) -> float:
        if len(self._samples) < 2:
            return 0.0
        (first_t, first_n), (last_t, last_n) = self._samples[0], self._samples[-1]
        return (last_n - first_n) / (last_t - first_t) if last_t > first_t else 0.0


class ProgressReporter:
    """Turns bytes on disk into DownloadProgress for the caller, ten times a second at most."""

    def __init__(self, callback: ProgressCallback | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._callback = callback
        self._clock = clock
        self._last = float("-inf")
        self.meter = SpeedMeter(clock)

    def report(self, file: str, done: int, total: int | None, paused: bool = False,
               force: bool = False) -> None:
        if self._callback is None:
            return
        now = self._clock()
        if not (force or paused) and now - self._last < _EVERY_S:
            return
        self._last = now
        speed = 0.0 if paused else self.meter.speed()
        left = (total - done) / speed if total is not None and speed > 0 else None
        self._callback(DownloadProgress(file, done, total, speed, left, paused))
