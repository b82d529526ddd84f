"""The frozen app, built once per test run (or the build KESTREL_FROZEN_DIR names), and ways to run it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WINDOWED, CONSOLE = ("kestrelw.exe", "kestrel.exe") if os.name == "nt" else ("Kestrel", "kestrel")


@pytest.fixture(scope="session")
def frozen_app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """<dist>/Kestrel/ from scripts/build.py: one build for every frozen test of the run.

    CI (or a person) that has built already points KESTREL_FROZEN_DIR at that folder.
    """
    given = os.environ.get("KESTREL_FROZEN_DIR")
    if given:
        folder = Path(given)
        if not (folder / CONSOLE).is_file():
            pytest.fail(f"KESTREL_FROZEN_DIR={given} holds no {CONSOLE}: build it with scripts/build.py")
        return folder
    out = tmp_path_factory.mktemp("frozen")
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "build.py"), "--dist", str(out / "dist"),
                             "--work", str(out / "work")], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"scripts/build.py failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}")
    print(f"\nfrozen build: {time.monotonic() - started:.0f} s, {result.stdout.strip().splitlines()[-1]}")
    return out / "dist" / "Kestrel"


def frozen_env(**extra: str) -> dict[str, str]:
    """The test's environment (its own KESTREL_HOME, offscreen Qt) without Python's own
    variables, which a user's double-click would not have either."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env.update(extra)
    return env
