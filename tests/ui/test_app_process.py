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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the XDG autostart file is Linux's sign-in entry")
def test_with_start_at_sign_in_each_start_points_the_entry_at_this_kestrel(tiny_model: Path, kestrel_home: Path,
                                                                            tmp_path: Path) -> None:
    # An install that moved keeps starting at sign-in: the entry is written again, naming this program.
    import dataclasses

    from app.core.paths import data_paths
    from app.core.settings import SettingsFile

    install_model(tiny_model)
    settings_file = SettingsFile(data_paths().settings_file)
    settings_file.save(dataclasses.replace(settings_file.load(), start_at_sign_in=True))
    config = tmp_path / "config home"
    entry = config / "autostart" / "kestrel.desktop"
    from app.core.autostart.xdg_autostart import XdgAutostartFile

    XdgAutostartFile(entry).enable(["/opt/Kestrel old/kestrel", "--background"])  # written by an install since moved
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", KESTREL_HOME=str(kestrel_home), XDG_CONFIG_HOME=str(config))
    app = subprocess.Popen([sys.executable, "-m", "app"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while "Kestrel old" in entry.read_text(encoding="utf-8") and time.monotonic() < deadline and app.poll() is None:
            time.sleep(0.1)
        text = entry.read_text(encoding="utf-8")
        assert "Kestrel old" not in text, "the sign-in entry was not pointed at this Kestrel at start"
        assert "--background" in text and "-m app" in text and "Exec=" in text
        app.send_signal(signal.SIGTERM)
        app.communicate(timeout=30)
    finally:
        app.kill()


def test_a_bug_escaping_a_slot_goes_to_the_log_by_where_not_by_its_words(tmp_path: Path, monkeypatch) -> None:
    import logging
    import sys as system

    from app.ui import app as app_module

    monkeypatch.setattr(system, "excepthook", system.excepthook)  # put back after the test
    app_module._log_uncaught()
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("app.uncaught").addHandler(handler)
    try:
        typed = "the person's " + "secret words"  # what a person typed, carried in an error's message
        try:
            raise ValueError(typed)
        except ValueError as error:
            system.excepthook(type(error), error, error.__traceback__)
    finally:
        logging.getLogger("app.uncaught").removeHandler(handler)
    [record] = records
    text = record.getMessage()
    assert "ValueError" in text and "test_app_process.py" in text
    assert "secret" not in text
