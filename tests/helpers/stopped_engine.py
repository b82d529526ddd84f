"""SIGSTOP an engine process: how tests make the real engine hang (a driver that never returns)."""

from __future__ import annotations

import os
import signal
import time

import psutil


def freeze(pid: int) -> None:
    """SIGSTOP the process and wait until the kernel says every thread of it is stopped
    (a thread busy at that moment may otherwise still answer one ping)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while psutil.Process(pid).status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
        time.sleep(0.005)
    assert psutil.Process(pid).status() == psutil.STATUS_STOPPED
