"""A real, small disk for tests of a full disk: a tmpfs mounted in the test's folder."""

from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


@contextmanager
def small_disk(folder: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of `size` (e.g. "256k") at folder; skip where that is not allowed."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    folder.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)]).returncode:
        pytest.skip("this sandbox cannot mount a tmpfs")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)
