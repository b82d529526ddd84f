"""A real X server for tests: Xvfb on a free display, openbox on it, and xdotool to press keys."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Iterator

import pytest

_TOOLS = ("Xvfb", "openbox", "xdotool")


def skip_without_x_tools() -> None:
    """Skip the test, naming what is missing, where Xvfb, openbox or xdotool is not installed."""
    missing = [tool for tool in _TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (apt-get install xvfb openbox xdotool)")


@dataclass
class XSession:
    """A running Xvfb with openbox: DISPLAY is the text to give programs."""

    display: str
    server: subprocess.Popen[bytes]
    window_manager: subprocess.Popen[bytes]

    def env(self) -> dict[str, str]:
        """This process's environment pointed at the session's display."""
        return {**os.environ, "DISPLAY": self.display}


def start_x_session(timeout: float = 15.0) -> XSession:
    """Start Xvfb on a display number it picks itself (-displayfd), then openbox on it. Once in a fresh-clone CI
    run (2026-12-07, suite beside suite) openbox exited with 1 at once on a new display and never again in the
    runs before or after; the cause is not known. So a session whose openbox ends at start is stopped and one
    more is started, and a second such end fails with what openbox said."""
    skip_without_x_tools()
    try:
        return _started_x_session(timeout)
    except _WindowManagerEnded:
        return _started_x_session(timeout)


class _WindowManagerEnded(RuntimeError):
    pass


def _started_x_session(timeout: float) -> XSession:
    read_end, write_end = os.pipe()
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_end), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
        pass_fds=(write_end,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    number = _read_display_number(read_end, server, timeout)
    display = f":{number}"
    with tempfile.TemporaryFile() as said:  # what openbox says, read only if it ends at start
        window_manager = subprocess.Popen(
            ["openbox", "--sm-disable"], env={**os.environ, "DISPLAY": display},
            stdout=subprocess.DEVNULL, stderr=said,
        )
        session = XSession(display, server, window_manager)
        try:
            _wait_for_window_manager(session, timeout)
        except _WindowManagerEnded as ended:
            stop_x_session(session)
            said.seek(0)
            words = said.read().decode(errors="replace").strip()
            raise _WindowManagerEnded(f"{ended}: {words or '(it said nothing)'}") from None
        except BaseException:
            stop_x_session(session)
            raise
    return session


def stop_x_session(session: XSession) -> None:
    """Stop openbox, then the server, and reap both."""
    for process in (session.window_manager, session.server):
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def x_session() -> Iterator[XSession]:
    """A generator for a fixture: one X session, stopped afterwards."""
    session = start_x_session()
    try:
        yield session
    finally:
        stop_x_session(session)


def xdotool(display: str, *args: str, timeout: float = 10.0) -> str:
    """Run xdotool on the display; its standard output."""
    done = subprocess.run(["xdotool", *args], env={**os.environ, "DISPLAY": display},
                          capture_output=True, text=True, timeout=timeout, check=True)
    return done.stdout


def send_keys(display: str, keys: str) -> None:
    """Press and release a combination as xdotool names it, e.g. "ctrl+alt+space"."""
    xdotool(display, "key", "--clearmodifiers", keys)


def wait_for_window(display: str, title: str, timeout: float = 10.0) -> int:
    """The id of a visible window whose title is exactly title, waiting until it appears."""
    deadline = time.monotonic() + timeout
    pattern = "^" + "".join("\\" + c if not c.isalnum() and c != " " else c for c in title) + "$"
    while True:
        found = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", pattern],
                               env={**os.environ, "DISPLAY": display}, capture_output=True, text=True, timeout=10)
        ids = found.stdout.split()
        if ids:
            return int(ids[0])
        if time.monotonic() > deadline:
            raise AssertionError(f"no visible window titled {title!r} on {display} after {timeout} s")
        time.sleep(0.05)


def _read_display_number(read_end: int, server: subprocess.Popen[bytes], timeout: float) -> int:
    """The number Xvfb writes to -displayfd once it is ready for clients."""
    deadline = time.monotonic() + timeout
    text = b""
    try:
        while not text.endswith(b"\n"):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Xvfb did not start (exit {server.poll()})")
            os.set_blocking(read_end, False)
            try:
                chunk = os.read(read_end, 16)
            except BlockingIOError:
                time.sleep(0.02)
                continue
            if not chunk:
                raise RuntimeError(f"Xvfb closed -displayfd without a number (exit {server.wait(5)})")
            text += chunk
    finally:
        os.close(read_end)
    return int(text)


def _wait_for_window_manager(session: XSession, timeout: float) -> None:
    """Wait until openbox manages the root: before it does, xdotool says the window manager "claims
    not to support _NET_ACTIVE_WINDOW"; after, only that no window is active yet."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if session.window_manager.poll() is not None:
            raise _WindowManagerEnded(f"openbox exited with {session.window_manager.returncode} on {session.display}")
        probe = subprocess.run(["xdotool", "getactivewindow"], env=session.env(),
                               capture_output=True, text=True, timeout=10)
        if "claims not to support" not in probe.stderr:
            return
        time.sleep(0.05)
    raise RuntimeError("openbox did not take the display in time")
