"""Garbage collection runs on the UI thread only: a widget never dies on a worker thread."""

from __future__ import annotations

import gc
import threading
import weakref

from PySide6.QtCore import QObject, QTimer

from app.ui.common.collector import MainThreadCollector, install


class _Cyclic(QObject):
    """A QObject with a running timer, kept alive only by a reference cycle."""

    def __init__(self) -> None:
        super().__init__()
        self.timer = QTimer(self)
        self.timer.start(10_000)
        self.me = self


def test_cycles_wait_for_the_ui_thread_then_are_collected(qapp) -> None:
    collector = install(qapp)
    assert install(qapp) is collector and qapp.findChild(MainThreadCollector) is collector
    assert not gc.isenabled()
    garbage = _Cyclic()
    gone = weakref.ref(garbage)
    del garbage
    # A worker thread that allocates a lot would have triggered the automatic GC there.
    worker = threading.Thread(target=lambda: [[object() for _ in range(100)] for _ in range(20_000)])
    worker.start()
    worker.join()
    assert gone() is not None, "collected off the UI thread"
    collector._thresholds = (0, 0, 0)
    collector.collect()
    assert gone() is None

