"""Kestrel in the tray: closing the window hides it there with quick ask on (said once) or while the API
server serves with the setting chosen, only where a tray exists; the tray asks, opens and quits."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtWidgets import QSystemTrayIcon

from app.core.settings import SettingsFile
from app.core.paths import data_paths
from app.service.events import Pace
from app.service.models.background import AppWindow, WindowState
from app.ui.server import server_host
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import run, service_of, until
from tests.ui.test_server_window import StandIn, serve

# Offscreen has no tray: the icon made anyway (availability is faked) says so once; it means nothing here.
pytestmark = pytest.mark.qt_log_ignore("No such signal QPlatformNativeInterface::systemTrayWindowChanged")


@pytest.fixture
def window(make_window, monkeypatch, loop):
    StandIn.started, StandIn.fail_with = [], ""
    monkeypatch.setattr(server_host, "api_server", StandIn)
    made = make_window(engine=ScriptedEngine())
    watch_closing(made)
    yield made
    run(loop, made.server.stop())


@pytest.fixture
def told(monkeypatch) -> list[tuple[str, str]]:
    """What the tray icon said (showMessage's title and words): offscreen shows no balloon to look at."""
    said: list[tuple[str, str]] = []
    monkeypatch.setattr(QSystemTrayIcon, "showMessage",
                        lambda _icon, title, words, *_rest: said.append((title, words)))
    return said


def watch_closing(window) -> None:
    closed: list[bool] = []
    window.closed.connect(lambda: closed.append(True))
    window.closed_log = closed


def has_tray(monkeypatch, available: bool) -> None:
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: available))


def quick_ask(loop, window, **changes) -> None:
    door = window.doors.settings
    run(loop, door.update_settings(dataclasses.replace(
        door.settings, quick_ask=dataclasses.replace(door.settings.quick_ask, **changes))))


def menu_texts(window) -> list[str]:
    return [action.text() for action in window.tray.menu.actions() if action.text()]


def trigger(window, text: str) -> None:
    next(action for action in window.tray.menu.actions() if action.text() == text).trigger()


def pace_of(window) -> tuple[WindowState, Pace, bool]:
    session = service_of(window).session
    return session.pace.window, session.pace.pace, session.client.paused


# --- quick ask -----------------------------------------------------------------------------------


def test_with_quick_ask_closing_hides_to_the_tray_and_says_so_once_even_after_a_restart(
        make_window, window, loop, monkeypatch, told) -> None:
    has_tray(monkeypatch, True)
    assert window.doors.settings.settings.quick_ask.enabled  # the default
    assert window.close() is False  # refused: hidden instead
    assert not window.isVisible() and window.closed_log == []
    assert window.tray.shown and window.tray.icon is not None and window.tray.icon.isVisible()
    assert menu_texts(window) == ["&Ask…", "&Open Kestrel", "&Quit"]
    assert window.tray.icon.toolTip() == "Kestrel"
    assert len(told) == 1
    title, words = told[0]
    assert title == "Kestrel is still running"
    assert "quick ask" in words and "Ctrl+Alt+Space" in words and "Quit" in words and "File → Quit" in words
    run(loop, until(lambda: window.doors.settings.settings.told_about_tray, what="told_about_tray saved"))
    assert SettingsFile(data_paths().settings_file).load().told_about_tray
    # Hidden to wait for the shortcut, not to serve: "when hidden: pause" holds the engine.
    assert pace_of(window) == (WindowState.HIDDEN, Pace.PAUSED, True)

    trigger(window, "&Open Kestrel")
    assert window.isVisible() and not window.tray.shown and not window.tray.icon.isVisible()
    assert window.close() is False and not window.isVisible()
    assert len(told) == 1, "said once"

    again = make_window(engine=ScriptedEngine())  # Kestrel started again over the same home
    watch_closing(again)
    assert again.doors.settings.settings.told_about_tray
    assert again.close() is False and again.tray.shown
    assert len(told) == 1, "said once, across a restart"


def test_a_shortcut_another_program_holds_is_not_offered_in_the_words(window, loop, monkeypatch, told) -> None:
    has_tray(monkeypatch, True)
    window.set_shortcut_held(False)
    window.close()
    assert "Ctrl+Alt+Space" not in told[0][1] and "Ask…" in told[0][1]


def test_with_quick_ask_off_and_no_server_closing_quits(window, loop, monkeypatch, told) -> None:
    has_tray(monkeypatch, True)
    quick_ask(loop, window, enabled=False)
    assert not window.hides_to_tray()
    window.close()
    assert window.closed_log == [True] and not window.tray.shown and told == []


def test_without_a_tray_closing_quits_even_with_quick_ask(window, loop, monkeypatch, told) -> None:
    has_tray(monkeypatch, False)  # a hidden window with no icon could never come back
    assert window.doors.settings.settings.quick_ask.enabled
    window.close()
    assert window.closed_log == [True] and told == []


def test_the_trays_ask_asks_and_its_quit_ends_kestrel(window, loop, monkeypatch, qtbot, told) -> None:
    has_tray(monkeypatch, True)
    window.close()
    with qtbot.waitSignal(window.tray.askRequested, timeout=1000):
        trigger(window, "&Ask…")
    assert not window.isVisible(), "asking leaves the main window in the tray"
    engine = service_of(window).session.client
    assert engine.running
    trigger(window, "&Quit")
    assert window.closed_log == [True] and not window.tray.shown
    run(loop, window.shut_down())  # what the app does when the window closed
    assert not engine.running, "the engine was shut down"


def test_file_quit_ends_kestrel_even_with_quick_ask(window, monkeypatch, told) -> None:
    has_tray(monkeypatch, True)
    quit_action = next(a for a in window.menuBar().actions()[0].menu().actions() if a.text() == "&Quit")
    quit_action.trigger()
    assert window.closed_log == [True] and not window.tray.shown and told == []


def test_the_engine_runs_while_the_quick_ask_window_is_shown_and_the_main_one_waits_in_the_tray(
        window, loop, monkeypatch, told) -> None:
    has_tray(monkeypatch, True)
    window.close()
    assert pace_of(window) == (WindowState.HIDDEN, Pace.PAUSED, True)
    service = service_of(window)
    service.set_window_state(WindowState.FOREGROUND, AppWindow.QUICK_ASK)  # as the quick-ask window does
    assert pace_of(window) == (WindowState.FOREGROUND, Pace.FULL, False)
    window.doors.set_window_state(WindowState.HIDDEN)  # the main window says again it is hidden
    assert pace_of(window) == (WindowState.FOREGROUND, Pace.FULL, False)
    service.set_window_state(WindowState.HIDDEN, AppWindow.QUICK_ASK)  # Esc
    assert pace_of(window) == (WindowState.HIDDEN, Pace.PAUSED, True)


# --- starting in the tray (--background) ---------------------------------------------------------


def test_started_in_the_tray_it_waits_there_and_opens_from_it(window, monkeypatch, told) -> None:
    has_tray(monkeypatch, True)
    window.hide()
    window.start_in_tray()
    assert not window.isVisible() and window.tray.shown and told == []
    assert pace_of(window)[:2] == (WindowState.HIDDEN, Pace.PAUSED)
    trigger(window, "&Open Kestrel")
    assert window.isVisible() and not window.tray.shown


def test_started_in_the_tray_without_a_tray_it_shows_the_window(window, monkeypatch) -> None:
    has_tray(monkeypatch, False)
    window.hide()
    window.start_in_tray()
    assert window.isVisible() and not window.tray.shown


def test_started_in_the_tray_with_quick_ask_off_in_the_settings_file_the_window_shows(
        make_window, loop, monkeypatch, told) -> None:
    has_tray(monkeypatch, True)
    first = make_window(engine=ScriptedEngine())  # writes the home's settings
    quick_ask(loop, first, enabled=False)
    window = make_window(engine=ScriptedEngine(), start=False)
    window.hide()
    window.start_in_tray()  # the settings are not read yet: the defaults say quick ask is on
    assert not window.isVisible() and window.tray.shown
    run(loop, service_of(window).start_up())
    assert window.isVisible() and not window.tray.shown


# --- serving from the tray -----------------------------------------------------------------------


def test_serving_with_the_setting_closing_hides_to_the_tray_and_open_brings_it_back(window, loop,
                                                                                     monkeypatch, told) -> None:
    has_tray(monkeypatch, True)
    quick_ask(loop, window, enabled=False)
    serve(loop, window, enabled=True, port=9131, tray_on_close=True)
    assert window.hides_to_tray()
    assert window.close() is False  # refused: hidden instead
    assert not window.isVisible() and window.closed_log == []
    assert window.tray.shown and window.tray.icon is not None
    assert window.tray.icon.toolTip() == "Kestrel: API on 127.0.0.1:9131"
    assert "API server" in told[0][1] and "API on 127.0.0.1:9131" in told[0][1]
    # Put away to serve: the answer policy sees a window in the background, not a minimized one.
    assert service_of(window).session.pace.window == WindowState.BACKGROUND
    assert window.server.on and not StandIn.started[0].stopped
    trigger(window, "&Open Kestrel")
    assert window.isVisible() and not window.tray.shown
    window.close()
    trigger(window, "&Quit")
    assert window.closed_log == [True] and not window.tray.shown


def test_without_the_setting_or_a_tray_or_a_running_server_closing_quits(window, loop, monkeypatch) -> None:
    has_tray(monkeypatch, True)
    quick_ask(loop, window, enabled=False)
    serve(loop, window, enabled=True, port=9132)
    assert not window.hides_to_tray()  # the setting is off (the default)
    serve(loop, window, tray_on_close=True)
    has_tray(monkeypatch, False)
    assert not window.hides_to_tray()  # no tray: a hidden window could never come back
    has_tray(monkeypatch, True)
    StandIn.fail_with = "Port 9133 is in use."
    serve(loop, window, port=9133)
    assert not window.hides_to_tray()  # it does not serve: nothing to stay for
    StandIn.fail_with = ""
    serve(loop, window, port=9134)
    assert window.hides_to_tray()
    window.quit()  # File → Quit ends Kestrel even so
    assert window.closed_log == [True] and window.tray.icon is None
