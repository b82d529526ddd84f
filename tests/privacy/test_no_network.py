"""Nothing Kestrel does on its own opens a network connection: checked with audit hooks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.ui.conftest import install_model

ROOT = Path(__file__).resolve().parents[2]

# Loaded by every Python process started with this PYTHONPATH, the engine included.
SITECUSTOMIZE = '''
import os, socket, sys

_LOG = os.environ["KESTREL_NET_LOG"]

def _watch(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "socket.sendto", "socket.bind"):
        if event in ("socket.connect", "socket.bind", "socket.sendto"):
            family = getattr(args[0], "family", None)
            if family == socket.AF_UNIX:
                return  # a local pipe between Kestrel's own processes
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()} {event} {args[1:]!r}\\n")

sys.addaudithook(_watch)
'''


def watched_env(tmp_path: Path, home: Path) -> tuple[dict, Path]:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "network.log"
    log.write_text("")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hooks), str(ROOT)]), KESTREL_NET_LOG=str(log),
               KESTREL_HOME=str(home), QT_QPA_PLATFORM="offscreen")
    return env, log


def test_the_watch_sees_a_connection_attempt(tmp_path: Path, kestrel_home: Path) -> None:
    env, log = watched_env(tmp_path, kestrel_home)
    code = "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\nexcept OSError:\n    pass"
    subprocess.run([sys.executable, "-c", code], env=env, timeout=30, check=True)
    assert "socket.connect" in log.read_text()


def test_chat_and_doctor_open_no_connection(tmp_path: Path, tiny_model: Path, kestrel_home: Path) -> None:
    env, log = watched_env(tmp_path, kestrel_home)
    for args in (["chat", "--model", str(tiny_model), "--max-tokens", "8", "hello, secret words"],
                 ["doctor", "--json"]):
        result = subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
    assert log.read_text() == ""


def test_the_window_opens_no_connection(tmp_path: Path, tiny_model: Path, kestrel_home: Path) -> None:
    install_model(tiny_model)
    env, log = watched_env(tmp_path, kestrel_home)
    app = subprocess.Popen([sys.executable, "-m", "app"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not psutil.Process(app.pid).children() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2.0)  # start-up, the hardware probe and the model load happen now
        app.send_signal(signal.SIGTERM)
        app.communicate(timeout=30)
    finally:
        app.kill()
    assert app.returncode == 0
    assert log.read_text() == ""
