"""`python -m app` as a user starts it: a real process, offscreen, closed politely."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.ui.conftest import install_model

ROOT = Path(__file__).resolve().parents[2]


# Windows has no SIGTERM to send a window (Popen.send_signal(SIGTERM) there is TerminateProcess,
# an exit without clean-up); its polite close is checked by the installer's upgrade step
# (scripts/windows_smoke.py upgrade, which closes a running Kestrel as the installer does).
@pytest.mark.skipif(sys.platform == "win32", reason="no SIGTERM for a window on Windows")
def test_the_app_starts_loads_the_model_and_closes_cleanly(tiny_model: Path, kestrel_home: Path) -> None:
    install_model(tiny_model)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", KESTREL_HOME=str(kestrel_home))
    app = subprocess.Popen([sys.executable, "-m", "app"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        engine = _wait_for_engine(app.pid)
        time.sleep(1.0)  # the model loads in the engine meanwhile
        assert app.poll() is None, app.stderr.read()
        app.send_signal(signal.SIGTERM)
        out, err = app.communicate(timeout=30)
    finally:
        app.kill()
    assert app.returncode == 0, err
    assert "Traceback" not in err
    engine.wait(timeout=10)
    assert not engine.is_running() or engine.status() == psutil.STATUS_ZOMBIE


def _wait_for_engine(pid: int) -> psutil.Process:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = psutil.Process(pid).children()
        if children:
            return children[0]
        time.sleep(0.1)
    raise AssertionError("the engine process never started")
