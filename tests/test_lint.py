"""Static checks: no undefined names, unused imports or similar slips anywhere in the project."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pyflakes_finds_nothing() -> None:
    # An undefined name in run_gui once only showed when a user started the app.
    result = subprocess.run([sys.executable, "-m", "pyflakes", "app", "tests", "benchmarks", "scripts"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.stdout == "" and result.returncode == 0, result.stdout + result.stderr
