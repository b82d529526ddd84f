"""`kestrel serve`: prints its address and key when ready, answers, stops on Ctrl+C with status 0."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import openai

from app.core.paths import data_paths
from app.core.settings import SettingsFile
from tests.server.serve_process import ROOT, interrupt, read_ready, serve_command, serve_env
from tests.service.conftest import install


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_kestrel_serve_prints_its_address_and_key_answers_and_stops_on_ctrl_c(tiny_model: Path,
                                                                               kestrel_home: Path) -> None:
    install(tiny_model)
    port = free_port()
    process = subprocess.Popen(serve_command("--port", str(port)), cwd=ROOT, env=serve_env(kestrel_home),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = read_ready(process)
        assert ready.address == f"http://127.0.0.1:{port}"
        with openai.OpenAI(base_url=f"{ready.address}/v1", api_key=ready.key, max_retries=0, timeout=60) as client:
            answer = client.chat.completions.create(model="", messages=[{"role": "user", "content": "Hi"}],
                                                    max_tokens=4)
        assert answer.usage is not None and 0 < answer.usage.completion_tokens <= 4
    finally:
        _, err = interrupt(process)
    assert process.returncode == 0, err
    assert "Traceback" not in err and "Stopped." in err
    assert " /v1/chat/completions 200 " in err  # each request is logged on stderr
    assert SettingsFile(data_paths().settings_file).load().server.key == ready.key  # kept for the next start


def test_kestrel_serve_on_a_port_in_use_says_so_and_fails(tiny_model: Path, kestrel_home: Path) -> None:
    install(tiny_model)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(serve_command("--port", str(port)), cwd=ROOT, env=serve_env(kestrel_home),
                              capture_output=True, text=True, timeout=180)
    assert done.returncode == 8, done.stderr
    assert f"Port {port} on 127.0.0.1 is already in use by another program" in done.stderr
    assert "Traceback" not in done.stderr and "API key" not in done.stdout
