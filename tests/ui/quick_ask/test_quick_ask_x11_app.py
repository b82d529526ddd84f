"""Quick ask for real on X11: Kestrel running on Xvfb with a window manager, the shortcut pressed with
xdotool while another program has the focus, a question typed and answered by the tiny model, Esc, and
`kestrel ask` waking the same window."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.core.paths import data_paths
from tests.helpers.x11 import XSession, send_keys, wait_for_window, xdotool
from tests.ui.conftest import install_model

ROOT = Path(__file__).resolve().parents[3]
QUICK_ASK = "Kestrel — Quick ask"
OTHER = "Another program"
# A window of another program that has the focus when the shortcut is pressed.
OTHER_PROGRAM = f"""
from PySide6.QtWidgets import QApplication, QTextEdit
app = QApplication([])
editor = QTextEdit()
editor.setWindowTitle({OTHER!r})
editor.resize(500, 300)
editor.show()
app.exec()
"""

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="an X server of its own (Xvfb) is a Linux test")


@pytest.fixture
def kestrel_on_x(x_display: XSession, tiny_model: Path, kestrel_home: Path,
                 tmp_path: Path) -> Iterator[tuple[XSession, subprocess.Popen[str], Path]]:
    """Kestrel started as a person starts it (`python -m app`, Qt on xcb), its model ready; stopped after."""
    install_model(tiny_model)
    log = tmp_path / "startup.jsonl"
    env = {**x_display.env(), "QT_QPA_PLATFORM": "xcb", "KESTREL_HOME": str(kestrel_home),
           "KESTREL_STARTUP_LOG": str(log)}
    env.pop("WAYLAND_DISPLAY", None)
    app = subprocess.Popen([sys.executable, "-m", "app"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        _until(lambda: app.poll() is not None or "model_ready" in _events(log), 90, "the model to be ready")
        assert app.poll() is None, app.communicate()[1]
        yield x_display, app, log
    finally:
        if app.poll() is None:
            app.send_signal(signal.SIGTERM)
        try:
            _out, err = app.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            app.kill()
            _out, err = app.communicate()
        assert "Traceback" not in err, err


def test_the_shortcut_over_another_program_opens_quick_ask_which_answers_hides_and_wakes_again(
        kestrel_on_x: tuple[XSession, subprocess.Popen[str], Path], tmp_path: Path) -> None:
    session, _app, log = kestrel_on_x
    display = session.display
    other = subprocess.Popen([sys.executable, "-c", OTHER_PROGRAM],
                             env={**session.env(), "QT_QPA_PLATFORM": "xcb"}, stderr=subprocess.DEVNULL)
    try:
        other_id = wait_for_window(display, OTHER, timeout=30)
        xdotool(display, "windowactivate", "--sync", str(other_id))
        assert _active(display) == other_id
        _until(lambda: "shortcut_held" in _events(log), 10, "the shortcut to be held")

        send_keys(display, "ctrl+alt+space")
        quick_id = wait_for_window(display, QUICK_ASK, timeout=10)
        _until(lambda: _active(display) == quick_id, 10, "the quick-ask window to take the focus")

        xdotool(display, "type", "--delay", "20", "Say hello")
        xdotool(display, "key", "Return")
        answers = _until(lambda: _answers(), 60, "the answer to be saved")
        [(title, question, answer)] = answers
        assert question == "Say hello" and title == "Say hello" and answer.strip(), answers

        xdotool(display, "key", "Escape")
        _until(lambda: not _visible(display, QUICK_ASK), 10, "Esc to hide the window")

        # `kestrel ask` (what a person binds in a desktop's own keyboard settings) wakes the same window.
        woken = subprocess.run([sys.executable, "-m", "app", "ask"], cwd=ROOT, capture_output=True, text=True,
                               env={**session.env(), "KESTREL_HOME": os.environ["KESTREL_HOME"]}, timeout=30)
        assert woken.returncode == 0, woken.stderr
        assert wait_for_window(display, QUICK_ASK, timeout=10) == quick_id
    finally:
        other.terminate()
        other.wait(timeout=10)


def _answers() -> list[tuple[str, str, str]]:
    """(chat title, question, answer) of each finished exchange in the history (read as another program would)."""
    with sqlite3.connect(f"file:{data_paths().history_db}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT c.title, q.text, a.text FROM conversations c"
                          " JOIN messages q ON q.conversation_id = c.id AND q.role = 'user'"
                          " JOIN messages a ON a.conversation_id = c.id AND a.role = 'assistant'"
                          " WHERE a.state = 'complete'").fetchall()
    return [tuple(row) for row in rows]


def _active(display: str) -> int:
    return int(xdotool(display, "getactivewindow").strip())


def _visible(display: str, title: str) -> bool:
    found = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", f"^{title}$"],
                           env={**os.environ, "DISPLAY": display}, capture_output=True, text=True, timeout=10)
    return bool(found.stdout.split())


def _events(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [json.loads(line)["event"] for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def _until(check: Callable[[], object], timeout: float, what: str, wait: float = 0.1):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except sqlite3.OperationalError:  # the history is not there yet
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(wait)
