"""A second launch brings the first window forward instead of opening the same history twice.

Before, a second window ran the start-up recovery and marked the first window's live
answer as interrupted ("cut off when Kestrel last closed").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.core.paths import data_paths
from app.ui.single_instance import SingleInstance
from tests.ui.conftest import install_model, run, until

ROOT = Path(__file__).resolve().parents[2]
HOLD = """
import sys, time
from PySide6.QtCore import QCoreApplication
from app.core.paths import data_paths
from app.ui.single_instance import SingleInstance
app = QCoreApplication(sys.argv)
instance = SingleInstance(data_paths().ensure())
assert instance.acquire()
print("first", flush=True)
time.sleep(60)
"""
SECOND = """
import sys
from PySide6.QtCore import QCoreApplication
from app.core.paths import data_paths
from app.ui.single_instance import SingleInstance
app = QCoreApplication(sys.argv)
second = SingleInstance(data_paths())
print("second" if second.acquire() else "heard" if second.ask_first_to_come_forward(3) else "not heard", flush=True)
"""


def second_launch(loop) -> str:  # type: ignore[no-untyped-def]
    """What a second launch, in a process of its own, made of the first's answer (this
    process's event loop runs the first meanwhile)."""
    launch = subprocess.Popen([sys.executable, "-c", SECOND], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
    run(loop, until(lambda: launch.poll() is not None, timeout=30, what="the second launch to end"))
    out, _ = launch.communicate()
    return out.strip()


def test_the_second_asks_the_first_to_come_forward(loop) -> None:
    paths = data_paths().ensure()
    first, second = SingleInstance(paths), SingleInstance(paths)
    asked: list[int] = []
    first.activated.connect(lambda: asked.append(1))
    try:
        assert first.acquire()
        assert not second.acquire()
        assert second_launch(loop) == "heard"
        assert asked == [1]
    finally:
        first.release()
        second.release()
    # Released: the next launch is the first again.
    third = SingleInstance(paths)
    assert third.acquire()
    third.release()


def test_a_first_window_that_was_killed_leaves_no_claim(loop) -> None:
    paths = data_paths().ensure()
    holder = subprocess.Popen([sys.executable, "-c", HOLD], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "first"
    blocked = SingleInstance(paths)
    assert not blocked.acquire()
    holder.kill()
    holder.communicate()
    after = SingleInstance(paths)
    asked: list[int] = []
    after.activated.connect(lambda: asked.append(1))
    try:
        assert after.acquire(), "the lock died with its process"
        assert second_launch(loop) == "heard", "the stale socket was replaced"
        assert asked == [1]
    finally:
        after.release()


def _events(log: Path) -> list[str]:
    return [json.loads(line)["event"] for line in log.read_text().splitlines()] if log.exists() else []


def _wait_for(what, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not what() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert what()


def test_a_second_launch_hands_over_and_leaves_the_first_answer_alone(tmp_path: Path, tiny_model: Path) -> None:
    from app.core.conversation import MessageState, Role
    from app.core.store.history import HistoryStore

    install_model(tiny_model)
    log = tmp_path / "startup.jsonl"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT), KESTREL_STARTUP_LOG=str(log))
    first = subprocess.Popen([sys.executable, "-m", "app"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: "model_ready" in _events(log), 60)
        # An answer left streaming in the history, as the first window's live answer is.
        with HistoryStore(data_paths().history_db) as history:
            chat = history.create_conversation("Live")
            history.add_message(chat.id, Role.USER, "Hello")
            live = history.add_message(chat.id, Role.ASSISTANT, "Half an ans", state=MessageState.STREAMING)
        started = time.monotonic()
        second = subprocess.run([sys.executable, "-m", "app"], cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=60)
        assert second.returncode == 0, second.stderr
        assert time.monotonic() - started < 20
        _wait_for(lambda: "brought_forward" in _events(log), 10)
        with HistoryStore(data_paths().history_db) as history:
            assert history.get_message(live.id).state == MessageState.STREAMING, "a second window recovered it"
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
    assert first.returncode == 0


EARLY = """
import sys
from app.core.window_handover import hand_over_early
handed = hand_over_early(background=sys.argv[1] == "background", wait_s=10)
print(handed, "PySide6" in sys.modules, flush=True)
"""


def early_launch(loop, how: str) -> str:  # type: ignore[no-untyped-def]
    """What app/__main__.py's early hand-over made of it, in a process of its own, and whether it imported Qt."""
    launch = subprocess.Popen([sys.executable, "-c", EARLY, how], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    run(loop, until(lambda: launch.poll() is not None, timeout=30, what="the early hand-over to end"))
    out, _ = launch.communicate()
    assert launch.returncode == 0
    return out.strip()


def test_the_early_hand_over_asks_the_first_window_without_importing_qt(loop) -> None:
    first = SingleInstance(data_paths().ensure())
    asked: list[int] = []
    first.activated.connect(lambda: asked.append(1))
    try:
        assert first.acquire()
        assert early_launch(loop, "window") == "0 False"
        assert asked == [1]
        assert early_launch(loop, "background") == "0 False"  # at sign-in the window is left as it is
        assert asked == [1]
    finally:
        first.release()


def test_with_no_window_the_early_hand_over_leaves_the_launch_to_be_the_window(loop) -> None:
    from app.core.window_handover import hand_over_early

    paths = data_paths()
    assert hand_over_early(False) is None
    assert not paths.data.exists()  # a first start makes nothing before the window does
    first = SingleInstance(paths.ensure())
    assert first.acquire()
    first.release()  # the lock file stays, held by no one: a window that closed
    assert hand_over_early(False) is None
    again = SingleInstance(paths)
    assert again.acquire(), "the early hand-over left the lock held"
    again.release()
