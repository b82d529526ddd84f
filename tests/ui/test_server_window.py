"""The window's API server with a stand-in server: it follows the settings, and the Server window shows it."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLineEdit, QMessageBox

from app.core.server_settings import ServerSettings
from app.server.runner import ServerState
from app.service import events as ev
from app.ui.server import server_host
from app.ui.server.server_window import KEPT_ROWS, ServerWindow
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import run, service_of, until
from tests.ui.test_server_settings import clipped


class StandIn:
    """Keeps the plan's ApiServer contract without a socket: what each start saw, and how it ends."""

    started: list["StandIn"] = []
    fail_with = ""

    def __init__(self, answers, settings, on_change) -> None:
        self.settings, self.on_change = settings, on_change
        self.state, self.address, self.error = ServerState.OFF, "", ""
        self.seen: ServerSettings | None = None
        self.stopped = False

    async def start(self) -> bool:
        self.seen = self.settings()
        StandIn.started.append(self)
        self.address = f"http://{self.seen.host}:{self.seen.port}"
        self.state, self.error = (ServerState.FAILED, StandIn.fail_with) if StandIn.fail_with else (ServerState.ON, "")
        self.on_change()
        return self.state == ServerState.ON

    async def stop(self) -> None:
        self.stopped, self.state = True, ServerState.OFF
        self.on_change()


@pytest.fixture
def window(make_window, monkeypatch, loop):
    StandIn.started, StandIn.fail_with = [], ""
    monkeypatch.setattr(server_host, "api_server", StandIn)
    made = make_window(engine=ScriptedEngine())
    yield made
    run(loop, made.server.stop())


def serve(loop, window, **changes) -> None:
    """Change the server settings as the Settings dialog does, and wait for the server to follow."""
    door = window.doors.settings
    run(loop, door.update_settings(dataclasses.replace(door.settings,
                                                       server=dataclasses.replace(door.settings.server, **changes))))
    run(loop, window.server.follow())  # in line behind the one the change started: done when it is


def record(n: int) -> ev.RequestRecord:
    return ev.RequestRecord(at=datetime(2026, 12, 1, 9, 30, n % 60, tzinfo=timezone.utc), client=f"127.0.0.1:{5000 + n}",
                            endpoint="/v1/chat/completions", model="tiny", prompt_tokens=12,
                            completion_tokens=40 + n, tokens_per_s=51.25, status=200)


def test_turned_on_it_saves_a_key_then_starts_and_the_status_line_says_where(window, loop) -> None:
    assert not window.server.on and not window.status.server.isVisible()
    assert StandIn.started == []  # off by default: nothing started
    serve(loop, window, enabled=True, port=9123)
    key = window.doors.settings.settings.server.key
    assert key.startswith("kestrel-")
    assert [s.seen.key for s in StandIn.started] == [key]  # the key was saved before the server first read it
    assert window.server.on
    assert window.status.server.isVisible() and window.status.server.text() == "API on 127.0.0.1:9123"
    serve(loop, window, tray_on_close=True, max_waiting=9)  # read at each request (or by the window): no restart
    assert len(StandIn.started) == 1
    serve(loop, window, port=9124)
    assert StandIn.started[0].stopped and StandIn.started[1].seen.port == 9124
    assert window.status.server.text() == "API on 127.0.0.1:9124"
    serve(loop, window, enabled=False)
    assert StandIn.started[1].stopped and not window.server.on
    assert not window.status.server.isVisible()
    assert window.doors.settings.settings.server.key == key  # kept for the next time


def test_a_failed_start_says_why_and_can_be_tried_again(window, loop, qtbot) -> None:
    StandIn.fail_with = "Port 9125 is in use by another program: choose another port in Settings → API server."
    serve(loop, window, enabled=True, port=9125)
    assert window.status.server.text() == "API server failed"
    window.status.server.click()
    shown = window.server_window
    assert isinstance(shown, ServerWindow) and shown.isVisible()
    assert StandIn.fail_with in shown.state.text() and shown.retry.isVisible()
    StandIn.fail_with = ""
    shown.retry.click()
    run(loop, until(lambda: window.server.on, what="the second start"))
    assert len(StandIn.started) == 2 and not shown.retry.isVisible()
    assert shown.state.text().startswith("On")


def test_the_server_window_shows_the_address_the_key_and_the_requests(window, loop, qtbot) -> None:
    window.show_server_window()
    shown = window.server_window
    assert shown is not None
    assert shown.state.text().startswith("Off") and shown.address.text() == "–"
    assert not shown.copy_key.isEnabled()
    serve(loop, window, enabled=True, port=9126)
    key = window.doors.settings.settings.server.key
    assert shown.address.text() == "http://127.0.0.1:9126"
    assert shown.key.text() == key and shown.key.echoMode() == QLineEdit.EchoMode.Password
    assert key not in shown.key.displayText()  # masked on screen
    shown.show_key.click()
    assert shown.key.displayText() == key
    QGuiApplication.clipboard().clear()
    shown.copy_key.click()
    assert QGuiApplication.clipboard().text() == key
    shown.copy_address.click()
    assert QGuiApplication.clipboard().text() == "http://127.0.0.1:9126"
    assert not shown.warning.isVisible()
    for n in range(KEPT_ROWS + 3):
        service_of(window).bus.emit(ev.ApiRequestLogged(record(n)))
    table = shown.requests
    assert table.rowCount() == KEPT_ROWS
    newest = [table.item(0, column).text() for column in range(table.columnCount())]
    assert newest[1:] == ["127.0.0.1:5102", "/v1/chat/completions", "tiny", "12 in, 142 out", "51.2", "200"]
    assert newest[0] == record(KEPT_ROWS + 2).at.astimezone().strftime("%H:%M:%S")
    serve(loop, window, listen_beyond_this_pc=True, host="0.0.0.0")
    assert shown.warning.isVisible() and "network" in shown.warning.text.text()
    assert window.status.server.text() == "API on port 9126, open to the network"
    # 0.0.0.0 is no address to connect to: this PC's clients are shown loopback, others told what to use.
    assert shown.address.text() == "http://127.0.0.1:9126"
    assert "Other devices: this PC's network address instead of 127.0.0.1." in shown.address_note.text()
    qtbot.waitExposed(shown)
    assert clipped(shown) == []


def test_a_new_key_is_asked_for_first_then_saved_and_read_by_the_running_server(window, loop, monkeypatch) -> None:
    serve(loop, window, enabled=True, port=9127)
    window.show_server_window()
    shown = window.server_window
    old = window.doors.settings.settings.server.key
    questions: list[str] = []

    def answer(reply):
        def question(parent, title, text, *rest):
            questions.append(text)
            return reply
        return question

    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.No))
    shown.new_key.click()
    assert len(questions) == 1 and "401" in questions[0]
    assert window.doors.settings.settings.server.key == old
    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.Yes))
    shown.new_key.click()
    run(loop, until(lambda: window.doors.settings.settings.server.key != old, what="the new key"))
    run(loop, window.server.follow())
    new = window.doors.settings.settings.server.key
    # The server reads the key at each request: the new one works at once, with no restart.
    assert new.startswith("kestrel-") and StandIn.started[0].settings().key == new
    assert len(StandIn.started) == 1 and window.server.on
    assert shown.key.text() == new


def test_view_menu_opens_the_server_window_and_its_settings_button_the_server_page(window, monkeypatch) -> None:
    from app.ui.settings.dialogs import SettingsDialog

    action = next(a for menu in window.menuBar().actions() if menu.text() == "&View"
                  for a in menu.menu().actions() if a.text() == "&API server…")
    action.trigger()
    assert window.server_window is not None and window.server_window.isVisible()
    pages = []
    monkeypatch.setattr(SettingsDialog, "exec", lambda dialog: pages.append(dialog.tabs.currentWidget()) or 0)
    window.server_window.settings_button.click()
    assert len(pages) == 1 and type(pages[0]).__name__ == "ServerSettingsPage"


def test_on_in_the_settings_file_it_starts_with_the_window_and_a_key_saved_first(make_window, monkeypatch, loop) -> None:
    from app.core.paths import data_paths
    from app.core.settings import SettingsFile

    StandIn.started, StandIn.fail_with = [], ""
    monkeypatch.setattr(server_host, "api_server", StandIn)
    window = make_window(engine=ScriptedEngine(), start=False)
    try:
        settings_file = SettingsFile(data_paths().settings_file)
        settings_file.save(dataclasses.replace(settings_file.load(), server=ServerSettings(enabled=True, port=9128)))
        assert StandIn.started == []  # nothing before the settings are read
        run(loop, service_of(window).start_up())
        run(loop, window.server.follow())
        key = settings_file.load().server.key
        assert key.startswith("kestrel-") and [s.seen.key for s in StandIn.started] == [key]
        assert window.status.server.text() == "API on 127.0.0.1:9128"
        run(loop, window.server.stop())  # the window closing
        assert StandIn.started[0].stopped and not window.status.server.isVisible()
        serve(loop, window, port=9129)
        assert len(StandIn.started) == 1  # closed: a late settings change starts nothing
    finally:
        run(loop, window.server.stop())


def test_the_server_windows_switch_turns_it_on_and_off_as_settings_does_and_shows_the_state(window, loop, qtbot) -> None:
    window.show_server_window()
    shown = window.server_window
    assert shown is not None and not shown.switch.isChecked() and shown.state.text().startswith("Off")
    shown.switch.click()
    run(loop, until(lambda: window.server.on, what="the server to start"))
    run(loop, window.server.follow())
    server = window.doors.settings.settings.server
    assert server.enabled and server.key.startswith("kestrel-")  # saved, as Settings' switch saves it
    assert [s.seen.key for s in StandIn.started] == [server.key]
    assert shown.switch.isChecked() and shown.state.text().startswith("On")
    assert window.status.server.text() == f"API on 127.0.0.1:{server.port}"
    shown.switch.click()
    run(loop, until(lambda: not window.server.on, what="the server to stop"))
    assert not window.doors.settings.settings.server.enabled and StandIn.started[0].stopped
    assert not shown.switch.isChecked() and shown.state.text().startswith("Off")
    serve(loop, window, enabled=True)  # turned on elsewhere (Settings): the switch follows
    assert shown.switch.isChecked() and len(StandIn.started) == 2
    qtbot.waitExposed(shown)
    assert clipped(shown) == []
