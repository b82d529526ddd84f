"""The cross-process lock that lets two Kestrels take turns (app/core/files.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.core.files import LockWaitCancelled, exclusive_lock

ROOT = Path(__file__).resolve().parents[2]
HOLD = """
import sys, time
from pathlib import Path
from app.core.files import exclusive_lock
with exclusive_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(lock: Path, seconds: float) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), str(seconds)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_process_waits_for_the_first(tmp_path: Path) -> None:
    lock = tmp_path / "a folder ü" / ".lock"
    holder = _holder(lock, 1.0)
    waited = []
    started = time.monotonic()
    with exclusive_lock(lock, waiting=lambda: waited.append(1)):
        held_after = time.monotonic() - started
    holder.communicate(timeout=30)
    assert waited == [1]
    assert held_after >= 0.5


def test_waiting_can_be_cancelled(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    holder = _holder(lock, 30)
    try:
        calls = iter(range(100))
        with pytest.raises(LockWaitCancelled):
            with exclusive_lock(lock, cancelled=lambda: next(calls) >= 3):
                pytest.fail("the lock was held by another process")
    finally:
        holder.kill()
        holder.communicate()


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    holder = _holder(lock, 60)
    holder.kill()
    holder.communicate()
    started = time.monotonic()
    with exclusive_lock(lock):
        pass
    assert time.monotonic() - started < 1
