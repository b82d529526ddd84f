"""Garbage collection on the UI thread only, so no Qt object is destroyed on a worker thread."""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

# How often the UI thread looks at the collector's counts (the same cadence
# qutebrowser uses for the same reason).
INTERVAL_MS = 1000


class MainThreadCollector(QObject):
    """Turns Python's automatic cyclic GC off and runs it from a timer on the UI thread.

    The automatic collector runs in whichever thread happens to allocate when a
    threshold is crossed: with the writer thread and the engine reader busy, that is
    often not the UI thread, and a widget in a reference cycle would then be destroyed
    there ("Timers cannot be stopped from another thread", then a crash).
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thresholds = gc.get_threshold()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.collect)
        self._timer.start(INTERVAL_MS)

    def collect(self) -> None:
        """Collect the generations whose counts passed their thresholds, as gc would."""
        counts = gc.get_count()
        for generation in (2, 1, 0):
            if counts[generation] > self._thresholds[generation]:
                gc.collect(generation)
                return


def install(app: QObject) -> MainThreadCollector:
    """One collector per application, owned by it."""
    existing = app.findChild(MainThreadCollector)
    return existing if existing is not None else MainThreadCollector(app)
