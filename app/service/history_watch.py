"""HistoryWatch: notices, off the event loop, that another Kestrel process committed to the history."""

from __future__ import annotations

import threading
from collections.abc import Callable

# How often the watch looks. A commit by `kestrel import` shows in the window within
# about this long plus one list read; a look costs one PRAGMA that reads shared memory.
WATCH_INTERVAL_S = 0.25


class HistoryWatch:
    """A thread that asks `foreign()` every `interval` seconds whether another process
    committed to the history since the last look, and calls `changed()` (on this
    thread: the caller hands it to its event loop) when one did.

    `foreign()` is the storage's: it reads `PRAGMA data_version` on the writer's own
    connection, on the writer thread. That value moves only for commits made by other
    connections, so the app's own writes are never reported. (A second, read-only
    connection of its own was tried first: in the same process its data_version was
    seen to stay put after another process's commit in about one run in three.)
    """

    def __init__(self, foreign: Callable[[], bool], changed: Callable[[], None],
                 interval: float = WATCH_INTERVAL_S) -> None:
        self._foreign = foreign
        self._changed = changed
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="kestrel-history-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End the thread; returns once it has."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _watch(self) -> None:
        while not self._stop.wait(self._interval):
            if self._foreign() and not self._stop.is_set():
                self._changed()
