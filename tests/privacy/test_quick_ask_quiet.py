"""Quick ask opens no network socket: the window on a real X server holds its global shortcut (a key
grab on a connection of its own), the shortcut opens the quick-ask window, a question is answered and
`kestrel ask` wakes it, all watched at the system-call level over the whole process tree."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.helpers.syscalls import findings, start_traced
from tests.helpers.x11 import XSession, send_keys, wait_for_window, x_session, xdotool
from tests.privacy.test_no_network import ROOT, app_env
from tests.ui.conftest import install_model

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="an X server of its own (Xvfb) is a Linux test")


@pytest.fixture(scope="module")
def x_display() -> Iterator[XSession]:
    yield from x_session()


@pytest.mark.slow
def test_the_shortcut_the_quick_window_and_kestrel_ask_open_no_network_socket(
        x_display: XSession, tmp_path: Path, tiny_model: Path, kestrel_home: Path) -> None:
    install_model(tiny_model)
    log, startup = tmp_path / "strace.log", tmp_path / "startup.jsonl"
    # -nolisten tcp Xvfb and DISPLAY=:N: Qt and the grab reach the X server through its Unix socket.
    env = {**app_env(kestrel_home), "DISPLAY": x_display.display, "QT_QPA_PLATFORM": "xcb",
           "KESTREL_STARTUP_LOG": str(startup)}
    env.pop("WAYLAND_DISPLAY", None)
    tracer = start_traced([sys.executable, "-m", "app"], log, env=env, cwd=ROOT)
    try:
        _until(lambda: {"model_ready", "shortcut_held"} <= set(_events(startup)), 90, "the model and the shortcut")
        send_keys(x_display.display, "ctrl+alt+space")
        wait_for_window(x_display.display, "Kestrel — Quick ask", timeout=10)
        xdotool(x_display.display, "type", "--delay", "20", "hello, secret words")
        xdotool(x_display.display, "key", "Return")
        time.sleep(2)  # the tiny model answers meanwhile
        xdotool(x_display.display, "key", "Escape")
        asked = subprocess.run([sys.executable, "-m", "app", "ask"], env=env, cwd=ROOT, capture_output=True,
                               text=True, timeout=30)
        assert asked.returncode == 0, asked.stderr
        wait_for_window(x_display.display, "Kestrel — Quick ask", timeout=10)
    finally:
        for child in psutil.Process(tracer.pid).children():
            child.send_signal(signal.SIGTERM)
        _out, err = tracer.communicate(timeout=60)
        tracer.kill()
    assert tracer.returncode == 0, err
    assert "quick_ask_shown" in _events(startup)
    assert findings(log.read_text(errors="replace")) == []


def _events(startup: Path) -> list[str]:
    if not startup.exists():
        return []
    return [json.loads(line)["event"] for line in startup.read_text(encoding="utf-8").splitlines() if line.strip()]


def _until(check, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
