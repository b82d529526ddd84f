"""Starts the window: Qt and asyncio on one thread through qasync."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
import traceback
from types import TracebackType

import psutil
import qasync
from PySide6.QtCore import QLocale, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from app import __version__
from app.core import autostart
from app.core.store.history import HistoryError
from app.core.paths import DataPaths, data_paths
from app.library.models import ModelLibrary
from app.service.doors.window import WindowDoors
from app.service.doors.quick_ask import QuickAskDoor
from app.service.events import ModelState, SettingsChanged
from app.service.models.client import EngineClient
from app.service.models.engine_handle import EngineHandle
from app.service.root import Service
from app.ui.common.app_style import AppStyle, app_style
from app.ui.common.collector import install as install_collector
from app.ui.common.icons import app_icon
from app.ui.main_window import MainWindow
from app.ui.quick_ask.quick_window import QuickAskWindow
from app.ui.quick_ask.reach import QuickAskReach
from app.ui.quick_ask.shortcuts import global_shortcut
from app.ui.quick_ask.shortcuts.shortcut import GlobalShortcut, ShortcutStatus
from app.ui.single_instance import SingleInstance
from app.ui.common.window_look import DialogLook

STARTUP_LOG_ENV = "KESTREL_STARTUP_LOG"
# The banner's kind for quick ask's shortcut: cleared when the shortcut is Kestrel's again.
SHORTCUT_PROBLEM = "shortcut"


def build_service(paths: DataPaths, client: EngineHandle | None = None, *, calibrate: bool = True) -> Service:
    """The service behind the window, over these data paths (the real engine unless a test gives another);
    `calibrate`: measure the loaded model's speed once in the background when nothing has been measured.

    Nothing here reads the disk: the history and settings open in start_up().
    """
    return Service(history_path=paths.history_db, settings_path=paths.settings_file,
                   library=ModelLibrary(paths.models), client=client or EngineClient(), calibrate=calibrate)


def build_window(service: Service, paths: DataPaths) -> MainWindow:
    """The window over the service's doors, for the app and for tests."""
    app = QApplication.instance()
    use_system_locale()
    if isinstance(app, QApplication):
        install_collector(app)
        use_app_style(app)
    window = MainWindow(WindowDoors.of(service), paths)
    DialogLook(window).watch(window)
    window.apply_theme()
    return window


def use_system_locale() -> None:
    """Dates and numbers Qt writes (a file dialog's, a spin box's) in the user's own form.

    With no locale set at all (C or POSIX: a bare container, a service), Qt would write
    dates as "1 12 2026"; English (United States) is the form most readers know then.
    """
    system = QLocale.system()
    if system.language() == QLocale.Language.C:
        system = QLocale(QLocale.Language.English, QLocale.Country.UnitedStates)
    QLocale.setDefault(system)


def use_app_style(app: QApplication) -> None:
    """The app's style (Fusion with its own icons) before the first widget: setting it later
    re-polishes every widget, and the widgets made before it keep Qt's stock icons."""
    if not isinstance(app.style(), AppStyle):
        app.setStyle(app_style())


def build_quick_ask(service: Service, window: MainWindow, shortcut: GlobalShortcut | None = None) -> QuickAskReach:
    """The quick-ask window and every way to it (the shortcut, the tray's Ask…), tied to the main window:
    "Continue in Kestrel" opens the exchange there, and the shortcut's state is said in it. `shortcut`:
    this desktop's (global_shortcut) unless a test gives one."""
    quick = QuickAskWindow(QuickAskDoor(service))
    reach = QuickAskReach(quick, shortcut or global_shortcut(window), window)
    window.tray.askRequested.connect(lambda: reach.summon())
    quick.continueRequested.connect(lambda conversation_id: _continue_in(window, conversation_id))
    reach.statusChanged.connect(lambda status: _say_shortcut(window, status))

    def follow(event: object) -> None:
        if isinstance(event, SettingsChanged):
            reach.follow(event.settings.quick_ask)

    window.doors.subscribe(follow)  # the first SettingsChanged comes once start-up has read the file
    window.closed.connect(reach.release)
    return reach


def _continue_in(window: MainWindow, conversation_id: int) -> None:
    window.bring_to_front()
    window.open_chat(conversation_id)


def _say_shortcut(window: MainWindow, status: ShortcutStatus) -> None:
    """The tray's words and Settings → Quick ask follow whether the shortcut is Kestrel's. A shortcut another
    program holds is also said in the window's banner (with where to choose another), never kept silent; but
    it never covers another problem, and a desktop that offers no global shortcut, or a person who declined
    it in the desktop's own dialog, is said on the Settings page only, not at every start."""
    window.set_shortcut_held(status.held, status.words)
    chat = window.chat
    if status.taken and window.doors.settings.settings.quick_ask.enabled:
        if chat.problem_kind in ("", SHORTCUT_PROBLEM):
            chat.show_problem(status.words, SHORTCUT_PROBLEM)
    else:
        chat.problem_solved(SHORTCUT_PROBLEM)


def run_gui(argv: list[str] | None = None, background: bool = False) -> int:
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(argv or sys.argv)
    app.setApplicationName("Kestrel")
    app.setApplicationVersion(__version__)
    app.setWindowIcon(app_icon())
    use_app_style(app)  # the message boxes below too
    # The window's closed signal ends the loop, after the engine is shut down.
    app.setQuitOnLastWindowClosed(False)
    paths = data_paths()
    try:
        paths.ensure()
    except OSError as exc:
        QMessageBox.critical(None, "Kestrel", f"Kestrel cannot create its folders under {paths.data} "
                             f"({exc.strerror or exc}). Check the disk and its permissions.")
        return 1
    instance = SingleInstance(paths)
    if not instance.acquire():
        # At sign-in (--background) a Kestrel already running is left as it is, without a word.
        return 0 if background else _hand_over_to_the_running_window(instance)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    service = build_service(paths)
    window = build_window(service, paths)
    instance.activated.connect(window.bring_to_front)
    reach = build_quick_ask(service, window)
    instance.askRequested.connect(reach.summon)
    window.closed.connect(lambda: _shut_down(loop, window))
    _close_on_signals(window)
    _log_uncaught()
    _log_startup_to(os.environ.get(STARTUP_LOG_ENV), window, instance, reach)
    if background:
        window.start_in_tray()  # at sign-in: in the tray when quick ask or the server keeps it there
    else:
        window.show()
    failed: list[str] = []
    with loop:
        # Opening the history and loading a model start once the window has painted.
        loop.call_soon(lambda: window.doors.spawn(_start(window, failed)))
        # run_forever, not run_until_complete: qasync's run_until_complete processes Qt
        # events once more after stopping, stepping tasks outside the running loop.
        loop.run_forever()
    instance.release()
    if failed:
        QMessageBox.critical(None, "Kestrel", failed[0])
        return 1
    return 0


async def _start(window: MainWindow, failed: list[str]) -> None:
    """Start the service (the API server follows its settings); a history that cannot be
    opened ends the app with its reason."""
    try:
        await window.doors.start_up()
    except HistoryError as exc:
        failed.append(str(exc))
        window.quit()
        return
    if window.doors.settings.settings.start_at_sign_in:
        await asyncio.to_thread(_renew_sign_in_entry)


def _renew_sign_in_entry() -> None:
    """The sign-in entry names this Kestrel's program: pointed at it again at each start, so that it follows
    an install that moved or was upgraded to another folder, unless the person turned it off outside
    Kestrel (then it stays off). A failure keeps the entry as it was."""
    try:
        autostart.renew()
    except autostart.AutostartError:
        pass


def _hand_over_to_the_running_window(instance: SingleInstance) -> int:
    """Kestrel already has a window on this history: bring it forward and leave."""
    if instance.ask_first_to_come_forward():
        return 0
    QMessageBox.information(None, "Kestrel", "Kestrel is already running, but its window did not "
                            "respond. Switch to it from the taskbar, or close it and start Kestrel again.")
    return 1


def _log_startup_to(path: str | None, window: MainWindow, instance: SingleInstance | None = None,
                    reach: QuickAskReach | None = None) -> None:
    """For benchmarks/startup.py (when the window painted, when the model was ready),
    benchmarks/quick_ask.py (when the quick-ask window showed, when each quick-ask answer's first
    text came and when it ended, when the idle policy unloaded the model; each with its wall-clock time) and the
    tests (when a second launch brought the window forward, when the shortcut was held)."""
    if not path:
        return
    # Here rather than at the top: only a run that keeps this log listens for answers.
    from app.service.events import AnswerFinished, AnswerInterrupted, AnswerStarted, TextGrew

    started = psutil.Process().create_time()

    def note(event: str) -> None:
        now = time.time()
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"event": event, "seconds": now - started, "at": now}) + "\n")

    answering: set[int] = set()  # quick-ask answers started and not yet over (message ids)
    waiting: set[int] = set()  # those still without text

    def quick_answers(event: object) -> None:
        """The first TextGrew of each answer in quick ask's exchange, and its end. Heard as the
        service publishes them, on the UI thread; the window draws the text in its next frame."""
        if isinstance(event, AnswerStarted):
            if reach is not None and event.message.conversation_id == reach.window.conversation_id:
                answering.add(event.message.id)
                waiting.add(event.message.id)
        elif isinstance(event, TextGrew) and event.message_id in waiting:
            waiting.discard(event.message_id)
            note("quick_ask_first_text")
        elif isinstance(event, (AnswerFinished, AnswerInterrupted)) and event.message.id in answering:
            answering.discard(event.message.id)
            waiting.discard(event.message.id)
            note("quick_ask_answer_over")

    if reach is not None:
        reach.statusChanged.connect(lambda status: note("shortcut_held" if status.held else "shortcut_not_held"))
        reach.window.shown.connect(lambda: note("quick_ask_shown"))
        window.doors.subscribe(quick_answers)

    QTimer.singleShot(0, lambda: note("window_shown"))
    def ready() -> None:
        state = window.doors.model.model_state
        if state == ModelState.READY:
            note("model_ready")
        elif state == ModelState.UNLOADED:
            note("model_unloaded")  # the idle policy gave the memory back

    window.adapter.modelStateChanged.connect(ready)
    if instance is not None:
        instance.activated.connect(lambda: note("brought_forward"))


def _log_uncaught() -> None:
    """A bug that escapes a Qt slot goes to Kestrel's log (Help → Open logs) instead of only a terminal that
    a windowed app does not have; the window goes on, as Qt goes on after it."""
    logger = logging.getLogger("app.uncaught")

    def hook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            sys.__excepthook__(kind, error, trace)
            return
        # Where it happened, not its message: an error's words can quote what the person wrote.
        logger.error("A bug escaped (%s); please report it with this log.\n%s", kind.__name__,
                     "".join(traceback.format_tb(trace)).rstrip())

    sys.excepthook = hook


def _close_on_signals(window: MainWindow) -> None:
    """Ctrl+C in a terminal, or a polite kill, closes the window like its close button."""
    # Python runs a handler between two bytecodes of whatever the main thread is doing,
    # e.g. inside EngineClient.send holding its lock; closing right there re-enters send
    # (hideEvent pauses the engine) and deadlocks. The event loop closes it instead.
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: QTimer.singleShot(0, window.quit))
    # Python runs signal handlers only when it gets control; a timer (a child of the
    # window, so it lives as long) gives it some.
    timer = QTimer(window)
    timer.timeout.connect(lambda: None)
    timer.start(250)


def _shut_down(loop: qasync.QEventLoop, window: MainWindow) -> None:
    """The window closed: stop the API server, the answer and the engine, then the event loop."""
    if window.property("shuttingDown"):
        return
    window.setProperty("shuttingDown", True)
    task = window.doors.spawn(window.shut_down())
    task.add_done_callback(lambda _: loop.stop())
