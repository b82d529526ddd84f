"""The X11 global shortcut on a real X server (Xvfb + openbox), pressed with xdotool."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Iterator

import pytest

from app.ui.quick_ask.shortcuts.shortcut import ShortcutStatus
from app.ui.quick_ask.shortcuts.x11_grab import X11KeyGrab
from tests.helpers.x11 import XSession, send_keys, xdotool

SEQUENCE = "Ctrl+Alt+Space"


@pytest.fixture
def grab(qtbot, x_display: XSession) -> Iterator[X11KeyGrab]:
    """A grab on the test display, released and its thread ended afterwards."""
    shortcut = X11KeyGrab(display_name=x_display.display)
    yield shortcut
    shortcut.release()
    qtbot.waitUntil(lambda: not shortcut.is_listening(), timeout=5000)


def bind_and_wait(qtbot, shortcut: X11KeyGrab, sequence: str = SEQUENCE) -> ShortcutStatus:
    """Bind and give the status the grab reports."""
    with qtbot.waitSignal(shortcut.statusChanged, timeout=5000) as blocker:
        shortcut.bind(sequence)
    status = blocker.args[0]
    assert isinstance(status, ShortcutStatus)
    return status


def test_the_shortcut_pressed_anywhere_is_activated(qtbot, grab: X11KeyGrab, x_display: XSession) -> None:
    status = bind_and_wait(qtbot, grab)
    assert status == ShortcutStatus(True, "Ctrl+Alt+Space opens quick ask from any program.")
    assert grab.status == status
    with qtbot.waitSignal(grab.activated, timeout=5000):
        send_keys(x_display.display, "ctrl+alt+space")


def test_numlock_on_does_not_stop_the_shortcut(qtbot, grab: X11KeyGrab, x_display: XSession) -> None:
    assert bind_and_wait(qtbot, grab).held
    xdotool(x_display.display, "key", "Num_Lock")
    try:
        with qtbot.waitSignal(grab.activated, timeout=5000):
            xdotool(x_display.display, "key", "ctrl+alt+space")
    finally:
        xdotool(x_display.display, "key", "Num_Lock")


def test_another_key_is_not_the_shortcut(qtbot, grab: X11KeyGrab, x_display: XSession) -> None:
    assert bind_and_wait(qtbot, grab).held
    with qtbot.assertNotEmitted(grab.activated, wait=400):
        send_keys(x_display.display, "ctrl+alt+k")


def test_released_the_key_no_longer_fires_and_the_thread_ends(qtbot, grab: X11KeyGrab, x_display: XSession) -> None:
    assert bind_and_wait(qtbot, grab).held
    grab.release()
    assert grab.status.held is False
    qtbot.waitUntil(lambda: not grab.is_listening(), timeout=2000)
    with qtbot.assertNotEmitted(grab.activated, wait=400):
        send_keys(x_display.display, "ctrl+alt+space")


def test_a_second_program_cannot_take_a_held_shortcut(qtbot, grab: X11KeyGrab, x_display: XSession) -> None:
    assert bind_and_wait(qtbot, grab).held
    second = X11KeyGrab(display_name=x_display.display)
    try:
        assert bind_and_wait(qtbot, second) == ShortcutStatus(
            False, "Ctrl+Alt+Space is already used by another program: choose another shortcut in Settings → Quick ask.",
            taken=True)
        qtbot.waitUntil(lambda: not second.is_listening(), timeout=2000)
    finally:
        second.release()
    with qtbot.waitSignal(grab.activated, timeout=5000):  # the first still holds it
        send_keys(x_display.display, "ctrl+alt+space")


def test_a_shortcut_held_by_another_process_is_reported(qtbot, grab: X11KeyGrab, x_display: XSession) -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], env=x_display.env(),
                              stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        status = bind_and_wait(qtbot, grab, "Ctrl+Shift+F12")
        assert status.held is False
        assert status.words.startswith("Ctrl+Shift+F12 is already used by another program")
    finally:
        holder.communicate("", timeout=10)


def test_rebinding_moves_the_shortcut(qtbot, grab: X11KeyGrab, x_display: XSession) -> None:
    assert bind_and_wait(qtbot, grab).held
    assert bind_and_wait(qtbot, grab, "Ctrl+Alt+K").held
    with qtbot.waitSignal(grab.activated, timeout=5000):
        send_keys(x_display.display, "ctrl+alt+k")
    with qtbot.assertNotEmitted(grab.activated, wait=400):
        send_keys(x_display.display, "ctrl+alt+space")


def test_a_key_without_modifier_is_refused_with_words(qtbot, grab: X11KeyGrab) -> None:
    status = bind_and_wait(qtbot, grab, "K")
    assert status.held is False
    assert "has no Ctrl, Alt or Meta key" in status.words
    assert not grab.is_listening()


# Another X client grabbing Ctrl+Shift+F12 through libX11 (keysym 0xFFC9), until its stdin closes.
_HOLDER = textwrap.dedent("""
    import ctypes, os, sys
    x = ctypes.CDLL("libX11.so.6")
    x.XOpenDisplay.restype = ctypes.c_void_p
    x.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
    x.XDefaultRootWindow.restype = ctypes.c_ulong
    x.XKeysymToKeycode.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
    x.XGrabKey.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_ulong, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    x.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
    d = x.XOpenDisplay(os.environ["DISPLAY"].encode())
    x.XGrabKey(d, x.XKeysymToKeycode(d, 0xFFC9), 0x05, x.XDefaultRootWindow(d), 0, 1, 1)
    x.XSync(d, 0)
    print("held", flush=True)
    sys.stdin.read()
""")
