"""The Wayland global shortcut against a fake xdg-desktop-portal (portal_template.py, python-dbusmock)
on a private D-Bus session bus.

python-dbusmock needs dbus-python, which Kestrel's own environment does not carry: the fake portal
runs under the interpreter KESTREL_TEST_DBUSMOCK_PYTHON names (a virtualenv with python-dbusmock), or
this one if it has python-dbusmock; otherwise these tests are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from app.ui.quick_ask.shortcuts.portal import PortalShortcut
from app.ui.quick_ask.shortcuts.shortcut import ShortcutStatus
from tests.ui.quick_ask.conftest import dbusmock_python

TEMPLATE = Path(__file__).with_name("portal_template.py")


def mock_call(address: str, method: str, *args: str) -> str:
    """Call one of the fake portal's test methods with dbus-send; its printed reply."""
    done = subprocess.run(
        ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.portal.Desktop",
         "/org/freedesktop/portal/desktop", f"org.freedesktop.DBus.Mock.{method}", *args],
        env={**os.environ, "DBUS_SESSION_BUS_ADDRESS": address}, capture_output=True, text=True, timeout=10, check=True)
    return done.stdout


@pytest.fixture
def start_portal(session_bus: str) -> Iterator[Callable[..., str]]:
    """Starts the fake portal on the private bus with the template's parameters; gives the bus address."""
    python = dbusmock_python()
    started: list[subprocess.Popen[bytes]] = []

    def start(**parameters: object) -> str:
        process = subprocess.Popen(
            [python, "-m", "dbusmock", "--template", str(TEMPLATE), "-p", json.dumps(parameters)],
            env={**os.environ, "DBUS_SESSION_BUS_ADDRESS": session_bus},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(process)
        deadline = time.monotonic() + 15
        while True:  # ready once it answers on the bus
            try:
                mock_call(session_bus, "BoundTriggers")
                return session_bus
            except subprocess.CalledProcessError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the fake portal did not start (exit {process.poll()})") from None
                time.sleep(0.05)

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def shortcuts(qtbot) -> Iterator[list[PortalShortcut]]:
    """Shortcuts made by a test, released and their threads ended afterwards."""
    made: list[PortalShortcut] = []
    yield made
    for shortcut in made:
        shortcut.release()
        qtbot.waitUntil(lambda: not shortcut.is_listening(), timeout=5000)


def bind_and_wait(qtbot, shortcut: PortalShortcut, sequence: str = "Ctrl+Alt+Space") -> ShortcutStatus:
    with qtbot.waitSignal(shortcut.statusChanged, timeout=10000) as blocker:
        shortcut.bind(sequence)
    status = blocker.args[0]
    assert isinstance(status, ShortcutStatus)
    return status


def test_the_portal_grants_the_shortcut_and_activated_reaches_kestrel(qtbot, start_portal, shortcuts) -> None:
    address = start_portal()
    shortcut = PortalShortcut(bus_address=address)
    shortcuts.append(shortcut)
    assert bind_and_wait(qtbot, shortcut) == ShortcutStatus(True, "Ctrl+Alt+Space opens quick ask from any program.")
    assert 'string "CTRL+ALT+space"' in mock_call(address, "BoundTriggers")
    with qtbot.waitSignal(shortcut.activated, timeout=5000):
        mock_call(address, "PressShortcut", "string:quick-ask")
    with qtbot.assertNotEmitted(shortcut.activated, wait=300):
        mock_call(address, "PressShortcut", "string:someone-else")


def test_released_the_session_ends_and_activated_no_longer_fires(qtbot, start_portal, shortcuts) -> None:
    address = start_portal()
    shortcut = PortalShortcut(bus_address=address)
    shortcuts.append(shortcut)
    assert bind_and_wait(qtbot, shortcut).held
    shortcut.release()
    assert shortcut.status.held is False
    qtbot.waitUntil(lambda: not shortcut.is_listening(), timeout=2000)


@pytest.mark.parametrize(("code", "words"), [
    (1, "Ctrl+Alt+Space was not allowed: it was cancelled in the desktop's own dialog."),
    (2, "The desktop refused Ctrl+Alt+Space as a global shortcut"),
])
def test_a_refusal_gives_words(qtbot, start_portal, shortcuts, code: int, words: str) -> None:
    shortcut = PortalShortcut(bus_address=start_portal(refuse=code))
    shortcuts.append(shortcut)
    status = bind_and_wait(qtbot, shortcut)
    assert status.held is False
    assert status.words.startswith(words)
    assert '"kestrel ask"' in status.words
    qtbot.waitUntil(lambda: not shortcut.is_listening(), timeout=2000)


def test_a_portal_too_old_gives_words(qtbot, start_portal, shortcuts) -> None:
    shortcut = PortalShortcut(bus_address=start_portal(version=0))
    shortcuts.append(shortcut)
    status = bind_and_wait(qtbot, shortcut)
    assert status.held is False
    assert "too old for global shortcuts (version 0)" in status.words


def test_no_portal_on_the_bus_gives_words(qtbot, session_bus: str, shortcuts) -> None:
    shortcut = PortalShortcut(bus_address=session_bus)
    shortcuts.append(shortcut)
    status = bind_and_wait(qtbot, shortcut)
    assert status.held is False
    assert status.words.startswith("This desktop's portal offers no global shortcuts")
    assert '"kestrel ask"' in status.words


def test_a_sequence_with_several_chords_is_refused_before_any_call(qtbot, session_bus: str, shortcuts) -> None:
    shortcut = PortalShortcut(bus_address=session_bus)
    shortcuts.append(shortcut)
    status = bind_and_wait(qtbot, shortcut, "Ctrl+K, Ctrl+L")
    assert status.held is False and "several presses" in status.words
    assert not shortcut.is_listening()
