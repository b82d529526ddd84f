"""`kestrel serve` as a child process: started, read until it says where it listens, ended like Ctrl+C."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
READY_LIMIT_S = 120


def serve_env(home: Path) -> dict[str, str]:
    return dict(os.environ, KESTREL_HOME=str(home), PYTHONPATH=str(ROOT))


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "app", "serve", *args]


@dataclass
class Ready:
    """What `kestrel serve` printed when it was ready: its address and key."""

    address: str
    key: str


def read_lines_until_key(process: subprocess.Popen[str]) -> list[str]:
    """stdout's lines up to "API key: …", read with a bound; AssertionError with what it said if it ended first."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    while True:
        line = lines.get(timeout=READY_LIMIT_S)
        if line is None:
            raise AssertionError(f"kestrel serve ended before it was ready: {seen}")
        seen.append(line)
        if line.startswith("API key: "):
            return seen


def read_ready(process: subprocess.Popen[str]) -> Ready:
    """The address and key lines, read with a bound; AssertionError with what it said if it ended first."""
    seen = read_lines_until_key(process)
    address = next(s for s in seen if s.startswith("Kestrel API server on "))
    return Ready(address.removeprefix("Kestrel API server on "), seen[-1].removeprefix("API key: "))


def interrupt(process: subprocess.Popen[str], *, traced: bool = False) -> tuple[str, str]:
    """Ctrl+C (SIGINT) to kestrel serve (under strace: to strace's child); its remaining output."""
    targets = psutil.Process(process.pid).children() if traced else [psutil.Process(process.pid)]
    for target in targets:
        target.send_signal(signal.SIGINT)
    return process.communicate(timeout=60)
