"""Fixtures for quick ask's tests: a real X session (Xvfb + openbox) and a private D-Bus session bus."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Iterator

import pytest

from tests.helpers.x11 import XSession, x_session


@pytest.fixture(scope="module")
def x_display() -> Iterator[XSession]:
    """One Xvfb with openbox for a test module; skipped with the reason where the tools are missing."""
    yield from x_session()


@pytest.fixture
def session_bus() -> Iterator[str]:
    """A private D-Bus session bus (dbus-daemon --session); its address."""
    if shutil.which("dbus-daemon") is None:
        pytest.skip("dbus-daemon is not installed (apt-get install dbus)")
    daemon = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert daemon.stdout is not None
    address = daemon.stdout.readline().strip()
    try:
        assert address, "dbus-daemon printed no address"
        yield address
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
        daemon.stdout.close()


def dbusmock_python() -> str:
    """An interpreter that can run python-dbusmock: KESTREL_TEST_DBUSMOCK_PYTHON, else this one."""
    chosen = os.environ.get("KESTREL_TEST_DBUSMOCK_PYTHON")
    for candidate in ([chosen] if chosen else []) + [sys.executable]:
        probe = subprocess.run([candidate, "-c", "import dbusmock"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return candidate
    pytest.skip("python-dbusmock is not installed (pip install python-dbusmock; it needs libdbus-1-dev)")
