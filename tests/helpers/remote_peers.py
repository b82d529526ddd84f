"""Real servers on 127.0.0.1 for remote-model tests: llama-cpp-python's own server, and a second `kestrel serve`."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.core.paths import DataPaths
from app.library.models import ModelLibrary
from tests.server.serve_process import ROOT, interrupt, read_ready, serve_command, serve_env

READY_LIMIT_S = 120


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def closed_port() -> int:
    """A port nothing listens on now (one just freed): connecting to it is refused."""
    return free_port()


@contextmanager
def llama_cpp_server(model: Path, log: Path, *, alias: str = "tiny", chat_format: str | None = None,
                     n_ctx: int = 1024) -> Iterator[str]:
    """`python -m llama_cpp.server` on the model, on a free port; its base URL once /v1/models answers.

    Skipped where its extra packages (llama-cpp-python[server]: fastapi, starlette-context,
    pydantic-settings) are not installed. It takes no port 0, so a free one is chosen and tried again
    if another program took it meanwhile."""
    for module in ("fastapi", "starlette_context", "pydantic_settings"):
        pytest.importorskip(module, reason="llama-cpp-python's server extra is not installed")
    for _ in range(3):
        port = free_port()
        args = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", alias,
                "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]
        if chat_format:
            args += ["--chat_format", chat_format]
        with log.open("ab") as out:
            process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            if _answers(url + "/v1/models", process):
                yield url
                return
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    raise AssertionError(f"llama_cpp.server did not start: {log.read_text(errors='replace')[-2000:]}")


def _answers(url: str, process: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + READY_LIMIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                json.loads(answer.read())
                return True
        except OSError:
            time.sleep(0.2)
    return False


@dataclass(frozen=True)
class KestrelPeer:
    """A second Kestrel's API server: where it listens, and its key."""

    url: str
    key: str


@contextmanager
def kestrel_peer(home: Path, model: Path) -> Iterator[KestrelPeer]:
    """`kestrel serve` in a home of its own with the model referenced; ended like Ctrl+C."""
    paths = DataPaths(home / "data", home / "config", home / "cache", home / "logs").ensure()
    ModelLibrary(paths.models).add_reference(model)
    process = subprocess.Popen(serve_command("--port", str(free_port())), cwd=ROOT, env=serve_env(home),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = read_ready(process)
        yield KestrelPeer(ready.address, ready.key)
    finally:
        interrupt(process)
