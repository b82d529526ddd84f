"""Starts the window: Qt and asyncio on one thread through qasync."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time

import psutil
import qasync
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from app import __version__
from app.core.history import HistoryError, HistoryStore
from app.core.paths import DataPaths, data_paths
from app.core.settings import SettingsFile
from app.library.models import ModelLibrary
from app.service.client import EngineClient
from app.ui.main_window import MainWindow
from app.ui.session import ChatSession

STARTUP_LOG_ENV = "KESTREL_STARTUP_LOG"


def build_window(paths: DataPaths, client: EngineClient | None = None) -> MainWindow:
    """The window and everything behind it, for the app and for tests."""
    paths.ensure()
    session = ChatSession(store=HistoryStore(paths.history_db), settings_file=SettingsFile(paths.settings_file),
                          library=ModelLibrary(paths.models), client=client or EngineClient())
    window = MainWindow(session)
    window.apply_theme()
    return window


def run_gui(argv: list[str] | None = None) -> int:
    app = QApplication.instance() or QApplication(argv or sys.argv)
    app.setApplicationName("Kestrel")
    app.setApplicationVersion(__version__)
    # The window's closed signal ends the loop, after the engine is shut down.
    app.setQuitOnLastWindowClosed(False)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    try:
        window = build_window(data_paths())
    except HistoryError as exc:
        QMessageBox.critical(None, "Kestrel", str(exc))
        return 1
    window.closed.connect(lambda: _shut_down(loop, window))
    _close_on_signals(window)
    _log_startup_to(os.environ.get(STARTUP_LOG_ENV), window)
    window.show()
    with loop:
        # Loading a model is slow: it starts once the window has painted.
        loop.call_soon(lambda: window.session.spawn(window.session.start_up()))
        # run_forever, not run_until_complete: qasync's run_until_complete processes Qt
        # events once more after stopping, stepping tasks outside the running loop.
        loop.run_forever()
        window.session.store.close()
    return 0


def _log_startup_to(path: str | None, window: MainWindow) -> None:
    """For benchmarks/startup.py: when the window painted, when the model was ready."""
    if not path:
        return
    started = psutil.Process().create_time()

    def note(event: str) -> None:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"event": event, "seconds": time.time() - started}) + "\n")

    QTimer.singleShot(0, lambda: note("window_shown"))
    window.session.modelStateChanged.connect(
        lambda: window.session.model_state.value == "ready" and note("model_ready"))


def _close_on_signals(window: MainWindow) -> None:
    """Ctrl+C in a terminal, or a polite kill, closes the window like its close button."""
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: window.close())
    # Python runs signal handlers only when it gets control; a timer gives it some.
    window._signal_timer = QTimer(window)
    window._signal_timer.timeout.connect(lambda: None)
    window._signal_timer.start(250)


def _shut_down(loop: qasync.QEventLoop, window: MainWindow) -> None:
    """The window closed: stop the answer and the engine, then the event loop."""
    if getattr(window, "_shutting_down", False):
        return
    window._shutting_down = True
    task = window.session.spawn(window.session.shutdown())
    task.add_done_callback(lambda _: loop.stop())
