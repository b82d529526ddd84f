"""Run the whole test suite as CI does: everything but the window's tests, then the window's tests in a
pytest process of their own.

    .venv/bin/python scripts/test.py [PYTEST OPTIONS]

Why two processes: run after the ~3,000 other tests in one process, the window's tests twice ended in a
segmentation fault inside Qt's event processing (pytest-qt's wait and teardown), in two different tests,
with every other thread idle; alone, tests/ui passes (382 of 382, twice). Since then the engine's writer
threads no longer outlive a dead engine (app/service/models/engine_process.py; there were 18 then), and the
whole suite has passed in one process (3,703 tests), but the crash was never made to happen on demand, so its
cause is not known (the session note of 2026-12-06 says what was ruled out); until it is, the window's tests
do not share a process with the rest. With paths or a -k/-m selection of your own, pytest runs once as you asked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NO_TESTS = 5  # pytest's exit status when a selection collects nothing


def main(args: list[str]) -> int:
    if any(Path(arg.split("::")[0]).exists() for arg in args if not arg.startswith("-")):  # paths: as asked
        return subprocess.call([sys.executable, "-m", "pytest", *args])
    rest = subprocess.call([sys.executable, "-m", "pytest", "--ignore=tests/ui", *args])
    window = subprocess.call([sys.executable, "-m", "pytest", "tests/ui", *args])
    statuses = [status for status in (rest, window) if status != NO_TESTS] or [NO_TESTS]
    return next((status for status in statuses if status != 0), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
