"""Issue 35 item 2: a dead engine costs at most one answer, through every front end.

The engine is killed for real (SIGKILL of llama.cpp's child process) mid-answer; the answer
ends with words its reader can act on, and the next request is answered by a new engine
(another pid). Most cases run on a tiny GGUF made for a long context (32k tokens), so an
answer still runs when the test kills it, however busy the machine is.

Already covered elsewhere, and not repeated here:
- the window's chat door (the controller) on the real engine, killed mid-answer, the text
  kept and the next send answered by a new engine:
  tests/service/test_real_engine_flow.py::test_engine_killed_mid_answer_keeps_the_text_and_the_next_send_works;
- the window killed between answers, its banner gone once a new engine answers:
  tests/ui/test_window_flow.py::test_the_banner_goes_when_the_model_is_ready_again_after_the_engine_died_between_answers;
- the window on the scripted engine, the cut answer shown and why:
  tests/ui/test_chat_window.py::test_engine_killed_mid_answer_keeps_the_text_on_screen_and_says_why;
- `kestrel chat --json` whose engine dies: every line stays JSON, exit 4:
  tests/cli/test_chat_cli_contract.py::test_json_lines_stay_json_when_the_engine_dies.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import psutil
import pytest

from app.core.generation import GenerationSettings
from tests.server.serve_process import ROOT, Ready, interrupt, read_ready, serve_command, serve_env
from tests.service.conftest import install
from tests.helpers.tiny_gguf import build_tiny_gguf

pytestmark = pytest.mark.skipif(os.name == "nt", reason="SIGKILL stands in for a native crash")

LONG_CONTEXT = 32768
# Answers that run until the context is full: minutes on the tiny model, so always still running when killed.
ENDLESS = GenerationSettings(max_tokens=100_000, temperature=0.8, context_length=LONG_CONTEXT)
LIMIT_S = 120  # generous: "answered instead of hanging", never a speed


@pytest.fixture(scope="module")
def long_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model, made for a 32k context."""
    return build_tiny_gguf(tmp_path_factory.mktemp("long") / "long tiny.gguf", n_ctx_train=LONG_CONTEXT)


def engines_of(pid: int) -> list[psutil.Process]:
    """The engine children of a Kestrel process (multiprocessing's spawned children)."""
    return [child for child in psutil.Process(pid).children()
            if "--multiprocessing-fork" in child.cmdline()]


def the_engine_of(pid: int, timeout: float = LIMIT_S) -> psutil.Process:
    """The one engine child of a Kestrel process, once it has one."""
    deadline = time.monotonic() + timeout
    while not (found := engines_of(pid)):
        assert time.monotonic() < deadline, "no engine was started"
        time.sleep(0.05)
    assert len(found) == 1, found
    return found[0]


def kill(engine: psutil.Process) -> None:
    """SIGKILL, as a crash in llama.cpp's C code ends the process, and wait until it is gone."""
    engine.send_signal(signal.SIGKILL)
    engine.wait(timeout=30)


# --- the API: `kestrel serve` ------------------------------------------------------------


@dataclass
class Serving:
    """A running `kestrel serve`: its process, address and key, and an HTTP client on it."""

    process: subprocess.Popen[str]
    ready: Ready
    http: httpx.Client

    def engine(self) -> psutil.Process:
        return the_engine_of(self.process.pid)

    def chat(self, text: str, *, max_tokens: int = 8, stream: bool = False) -> httpx.Response:
        return self.http.post("/v1/chat/completions", json={
            "model": "", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
            "stream": stream})

    def loaded(self) -> bool:
        models = self.http.get("/v1/models").json()["data"]
        return any(model["loaded"] for model in models)


def free_port() -> int:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def serving(long_model: Path, kestrel_home: Path) -> Iterator[Serving]:
    install(long_model, ENDLESS)
    process = subprocess.Popen(serve_command("--port", str(free_port())), cwd=ROOT, env=serve_env(kestrel_home),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = read_ready(process)
        with httpx.Client(base_url=ready.address, headers={"Authorization": f"Bearer {ready.key}"},
                          timeout=LIMIT_S) as http:
            yield Serving(process, ready, http)
    finally:
        _, err = interrupt(process)
        assert process.returncode == 0, err
        assert "Traceback" not in err, err


def _answered_by(serving: Serving, engine_before: int) -> psutil.Process:
    """The next request is answered (200, text), by a new engine."""
    answer = serving.chat("Are you back?")
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"]
    engine = serving.engine()
    assert engine.pid != engine_before
    return engine


def _error_words(body: dict[str, object]) -> str:
    error = body["error"]
    assert isinstance(error, dict) and error["code"] == "engine_error", body
    message = error["message"]
    assert isinstance(message, str)
    return message


def test_api_stream_killed_mid_answer_ends_with_an_error_and_the_next_request_gets_a_new_engine(
        serving: Serving) -> None:
    engine = serving.engine()
    pieces: list[str] = []
    events: list[dict[str, object]] = []
    with serving.http.stream("POST", "/v1/chat/completions", json={
            "model": "", "messages": [{"role": "user", "content": "Keep talking"}], "stream": True}) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line.removeprefix("data: "))
            events.append(event)
            choices = event.get("choices") or [{}]
            pieces.append(choices[0].get("delta", {}).get("content") or "")  # type: ignore[union-attr]
            if len("".join(pieces)) > 30 and engine.is_running():
                kill(engine)
    assert len("".join(pieces)) > 30, "what was streamed before the kill reached the client"
    last = events[-1]
    assert "error" in last, f"the stream ended without saying why: {last}"
    assert "Send the request again" in _error_words(last)
    _answered_by(serving, engine.pid)


def test_api_answer_killed_mid_answer_is_a_503_and_the_next_request_gets_a_new_engine(serving: Serving) -> None:
    engine = serving.engine()
    busy_before = sum(engine.cpu_times()[:2])
    answers: list[httpx.Response] = []
    asking = threading.Thread(target=lambda: answers.append(serving.chat("Keep talking", max_tokens=100_000)))
    asking.start()
    # Mid-answer: the engine has been working on it for a while (CPU time, not wall time).
    deadline = time.monotonic() + LIMIT_S
    while sum(engine.cpu_times()[:2]) - busy_before < 0.5:
        assert time.monotonic() < deadline and asking.is_alive(), "the answer never started"
        time.sleep(0.05)
    kill(engine)
    asking.join(LIMIT_S)
    assert answers, "the request never ended"
    cut = answers[0]
    assert cut.status_code == 503 and cut.headers.get("retry-after") == "1", cut.text
    assert "Send the request again: the next one starts a new engine" in _error_words(cut.json())
    _answered_by(serving, engine.pid)


def test_api_engine_killed_between_requests_the_next_one_gets_a_new_engine(serving: Serving) -> None:
    first = serving.chat("Hello")
    assert first.status_code == 200, first.text
    engine = serving.engine()
    kill(engine)
    deadline = time.monotonic() + LIMIT_S
    while serving.loaded():  # the server has heard of it
        assert time.monotonic() < deadline, "the engine's death was never noticed"
        time.sleep(0.05)
    again = _answered_by(serving, engine.pid)
    # And a second death costs no more than the first.
    kill(again)
    while serving.loaded():
        assert time.monotonic() < deadline, "the engine's death was never noticed"
        time.sleep(0.05)
    _answered_by(serving, again.pid)
