"""Closing the window while the API server serves: to the tray only when the user chose it and a tray exists."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QSystemTrayIcon

from app.service.models.background import WindowState
from app.ui.server import server_host
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import run, service_of
from tests.ui.test_server_window import StandIn, serve


@pytest.fixture
def window(make_window, monkeypatch, loop):
    StandIn.started, StandIn.fail_with = [], ""
    monkeypatch.setattr(server_host, "api_server", StandIn)
    made = make_window(engine=ScriptedEngine())
    closed: list[bool] = []
    made.closed.connect(lambda: closed.append(True))
    made.closed_log = closed
    yield made
    run(loop, made.server.stop())


def has_tray(monkeypatch, available: bool) -> None:
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: available))


# Offscreen has no tray: the icon made anyway (availability is faked) says so once; it means nothing here.
@pytest.mark.qt_log_ignore("No such signal QPlatformNativeInterface::systemTrayWindowChanged")
def test_with_the_setting_closing_hides_to_the_tray_and_open_brings_it_back(window, loop, monkeypatch) -> None:
    has_tray(monkeypatch, True)
    serve(loop, window, enabled=True, port=9131, tray_on_close=True)
    assert window.tray.keeps_serving()
    assert window.close() is False  # refused: hidden instead
    assert not window.isVisible() and window.closed_log == []
    assert window.tray.serving_from_tray and window.tray.icon is not None
    assert window.tray.icon.toolTip() == "Kestrel: API on 127.0.0.1:9131"
    assert [a.text() for a in window.tray.menu.actions() if a.text()] == ["&Open Kestrel", "&Quit"]
    # Put away to serve: the answer policy sees a window in the background, not a minimized one.
    assert service_of(window).session.pace.window == WindowState.BACKGROUND
    assert window.server.on and not StandIn.started[0].stopped
    window.tray.menu.actions()[0].trigger()  # Open Kestrel
    assert window.isVisible() and not window.tray.serving_from_tray
    window.close()
    window.tray.menu.actions()[-1].trigger()  # Quit, from the tray
    assert window.closed_log == [True] and not window.tray.serving_from_tray


def test_without_the_setting_or_a_tray_or_a_running_server_closing_quits(window, loop, monkeypatch) -> None:
    has_tray(monkeypatch, True)
    serve(loop, window, enabled=True, port=9132)
    assert not window.tray.keeps_serving()  # the setting is off (the default)
    serve(loop, window, tray_on_close=True)
    has_tray(monkeypatch, False)
    assert not window.tray.keeps_serving()  # no tray: a hidden window could never come back
    has_tray(monkeypatch, True)
    StandIn.fail_with = "Port 9133 is in use."
    serve(loop, window, port=9133)
    assert not window.tray.keeps_serving()  # it does not serve: nothing to stay for
    StandIn.fail_with = ""
    serve(loop, window, port=9134)
    assert window.tray.keeps_serving()
    window.quit()  # File → Quit ends Kestrel even so
    assert window.closed_log == [True] and window.tray.icon is None
