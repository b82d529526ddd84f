"""Fixtures for window tests: a qasync loop, and windows over an isolated Kestrel home."""

from __future__ import annotations

import asyncio
import gc
import dataclasses
import time
from pathlib import Path
from typing import Callable

import pytest
import qasync
from PySide6.QtTest import QTest

from app.core.generation import GenerationSettings
from app.core.paths import data_paths
from app.core.settings import Settings, SettingsFile
from app.library.importer import import_model_file
from app.library.models import ModelLibrary
from app.service.models.client import EngineClient
from app.service.models.engine_handle import EngineHandle
from app.service.models.model_setup import ModelSetup
from app.service.root import Service
from app.ui.app import build_service, build_window
from app.ui.main_window import MainWindow
from tests.helpers.scripted_engine import ScriptedEngine


@pytest.fixture(autouse=True)
def _clipboard_emptied_after(qapp):
    """Each window test leaves the clipboard empty. A QMimeData made in Python and handed to
    the offscreen platform's clipboard (a C++ global) is deleted only at process exit, after
    Python has ended, and its wrapper's destructor then crashes the test process (exit 139,
    every test passed). On xcb the clipboard goes with the application (checked); Windows and
    macOS were not checked."""
    yield
    qapp.clipboard().clear()


@pytest.fixture
def loop(qapp):
    """asyncio on Qt's event loop, as in the app, and always "running".

    qasync's run_until_complete processes Qt events once more after the loop stops,
    which steps tasks with no running loop; tests instead keep the loop marked as
    running and let Qt's own event processing drive it (see run()).
    """
    event_loop = qasync.QEventLoop(qapp, already_running=True)
    asyncio.set_event_loop(event_loop)
    yield event_loop
    # Not event_loop.stop(): qasync stops by calling QApplication.exit(), and after that
    # every QEventLoop.exec() in this process returns at once (Qt keeps "quitNow" set
    # until the next QApplication.exec()), so later tests' qtbot.wait() would not wait
    # and their timers would never fire. Marked stopped instead (qasync's own flag).
    event_loop._QEventLoop__is_running = False  # type: ignore[attr-defined]
    asyncio.events._set_running_loop(None)
    event_loop.close()
    asyncio.set_event_loop(None)


def run(loop, awaitable, timeout: float = 90):
    """Wait, processing Qt events, until the awaitable is done; return its result."""
    task = asyncio.ensure_future(awaitable, loop=loop)
    deadline = time.monotonic() + timeout
    while not task.done():
        if time.monotonic() > deadline:
            task.cancel()
            raise AssertionError(f"timed out after {timeout} s")
        QTest.qWait(5)
    return task.result()


async def until(predicate: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def install_model(model: Path, generation: GenerationSettings | None = None) -> None:
    """Put a model in this home's library and make it the default."""
    paths = data_paths().ensure()
    installed = import_model_file(ModelLibrary(paths.models), model)
    settings = Settings(default_model=installed.id,
                        generation=generation or GenerationSettings(max_tokens=24, temperature=0.0,
                                                                    context_length=1024))
    SettingsFile(paths.settings_file).save(settings)


# The service behind each window a test made: the window holds only its doors, tests reach the owners here.
_SERVICES: dict[int, Service] = {}


def service_of(window: MainWindow) -> Service:
    """The service behind a window made by make_window (its owners, for a test to look into or drive)."""
    return _SERVICES[id(window)]


@pytest.fixture
def make_window(loop, qtbot, tiny_model, monkeypatch):
    """Windows over the tiny model (by default), started up and shut down cleanly.

    On a real engine unless a test passes engine= (a ScriptedEngine: an answer that must
    still be running when the test looks, which a real model may end at any token).
    model=None: no model installed, and the starter's packages unseen unless starter=True
    (the first start would otherwise put the 1.1 GB starter together in the test's home, hash
    it and load it: 40 GB written and about two minutes of CPU per suite run, for windows that
    never ask for an answer).
    """
    windows: list[MainWindow] = []

    def make(*, model: Path | None = tiny_model, start: bool = True,
             generation: GenerationSettings | None = None, hardware=None,
             engine: EngineHandle | None = None, starter: bool = False) -> MainWindow:
        if model is None and not starter:
            monkeypatch.setattr(ModelSetup, "starter_available", lambda self: False)
        if model is not None and not windows:
            install_model(model, generation)
        service = build_service(data_paths(), engine or EngineClient(hardware=hardware), calibrate=False)
        window = build_window(service, data_paths())
        _SERVICES[id(window)] = service
        qtbot.addWidget(window)
        window.show()
        windows.append(window)
        if start:
            run(loop, service.start_up())
        return window

    yield make
    for window in windows:
        run(loop, _SERVICES.pop(id(window)).shutdown())
    # Collected here, on the UI thread: automatic GC is off in a Qt process (see
    # app/ui/common/collector.py), and these windows must not die on a worker thread.
    windows.clear()
    gc.collect()


def long_answers() -> ScriptedEngine:
    """An engine whose answers run about a minute unless stopped: for a test that acts while
    one is still running. The tiny real model fills its 1024-token context in about a second
    on two cores, and may end an answer at any token, so those tests raced it."""
    return ScriptedEngine(token_s=0.05)


def idle(window: MainWindow) -> Callable[[], bool]:
    """A predicate: the window's answer is done."""
    chat = window.doors.chat
    return lambda: chat.answering_id is None and not chat.waiting_ids and not chat.open_chat_busy


def stored(loop, window: MainWindow, method, *args):
    """Read the history as the service's writer thread does."""
    return run(loop, service_of(window).storage.history(method, *args))


def with_generation(window: MainWindow, loop=None, **changes) -> None:
    """Change the open conversation's settings (creating it if needed)."""
    chat = window.doors.chat
    system_prompt, settings = chat.conversation_settings()
    task = chat.set_conversation_settings(system_prompt, dataclasses.replace(settings, **changes))
    run(loop or asyncio.get_event_loop(), task)


def choose_in_settings(window: MainWindow, monkeypatch, **choices: str) -> None:
    """Open File → Settings…, pick a value in each named combo box, press OK."""
    from app.ui.settings.dialogs import SettingsDialog

    def accept(dialog: SettingsDialog) -> int:
        for name, value in choices.items():
            combo = getattr(dialog, name)
            combo.setCurrentIndex(combo.findData(value))
        return 1

    monkeypatch.setattr(SettingsDialog, "exec", accept)
    window.edit_settings()
