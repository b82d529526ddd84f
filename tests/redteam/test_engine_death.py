"""Issue 35 item 2: a dead engine costs at most one answer, through every front end.

The engine is killed for real (SIGKILL of llama.cpp's child process) mid-answer; the answer
ends with words its reader can act on, and the next request is answered by a new engine
(another pid). Most cases run on a tiny GGUF made for a long context (32k tokens), so an
answer still runs when the test kills it, however busy the machine is.

Beside this file: the window killed mid-answer on the real engine, the shown text kept and
the next message answered by a new engine (tests/ui/test_engine_death_window.py), and the
API's rules on the scripted engine (tests/service/test_api_answers.py, the issue 35 part):
requests that come together after a death share one load, and a model that will not load
is refused with its reason after one load per request, never a loop.

Already covered elsewhere, and not repeated here:
- the window's chat door (the service) on the real engine, killed mid-answer, the text
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
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import psutil
import pytest

from app.core.conversation import MessageState, Role
from app.core.generation import GenerationSettings
from app.core.store.history import HistoryStore
from app.core.paths import data_paths
from app.core.settings import Settings, SettingsFile
from app.tools.mcp_config import McpServerConfig, write_mcp_config
from tests.server.serve_process import ROOT, Ready, interrupt, read_ready, serve_command, serve_env
from tests.service.conftest import install
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.helpers.tool_call_gguf import build_tool_call_gguf

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
        return any(model.get("loaded") for model in models)  # the speech models listed after say nothing of it


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


# Each API shape that streams: its path, and how its events carry text and an error.
STREAMS = {
    "openai": ("/v1/chat/completions", {}),
    "anthropic": ("/v1/messages", {"max_tokens": 100_000}),
}


def _streamed_text(event: dict[str, Any]) -> str:
    if "choices" in event:  # OpenAI's chunk
        return str((event["choices"] or [{}])[0].get("delta", {}).get("content") or "")
    return str(event.get("delta", {}).get("text") or "") if event.get("type") == "content_block_delta" else ""


@pytest.mark.parametrize("shape", list(STREAMS))
def test_api_stream_killed_mid_answer_ends_with_an_error_and_the_next_request_gets_a_new_engine(
        serving: Serving, shape: str) -> None:
    path, extra = STREAMS[shape]
    engine = serving.engine()
    text = ""
    events: list[dict[str, Any]] = []
    with serving.http.stream("POST", path, json={
            "model": "", "messages": [{"role": "user", "content": "Keep talking"}], "stream": True,
            **extra}) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            events.append(json.loads(line.removeprefix("data: ")))
            text += _streamed_text(events[-1])
            if len(text) > 30 and engine.is_running():
                kill(engine)
    assert len(text) > 30, "what was streamed before the kill reached the client"
    error = events[-1].get("error")
    assert isinstance(error, dict), f"the stream ended without saying why: {events[-1]}"
    assert "Send the request again: the next one starts a new engine" in error["message"]
    assert error.get("code", "engine_error") == "engine_error"
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


# --- the CLI: `kestrel chat` -------------------------------------------------------------
# One question per process: the next question is the next `kestrel chat`, and --save keeps
# both in the history, where the window shows them.


def kestrel_chat(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "app", "chat", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8")


def rest_of(chat: subprocess.Popen[str]) -> tuple[str, str]:
    """What it writes until it ends. Not communicate(): that reads the pipe itself and
    would lose what readline() already took into the text wrapper's buffer."""
    stdout, stderr = chat.stdout, chat.stderr
    assert stdout is not None and stderr is not None
    ender = threading.Timer(LIMIT_S, chat.kill)  # a chat that never ends fails, never hangs
    ender.start()
    errs: list[str] = []
    reading = threading.Thread(target=lambda: errs.append(stderr.read()))
    try:
        reading.start()
        out = stdout.read()
        reading.join()
        chat.wait()
    finally:
        ender.cancel()
    return out, errs[0]


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_cli_chat_killed_mid_answer_says_so_keeps_the_text_and_the_next_chat_is_answered(
        long_model: Path, kestrel_home: Path) -> None:
    with kestrel_chat("--model", str(long_model), "--ctx", str(LONG_CONTEXT), "--max-tokens", "100000",
                      "--json", "--save", "Keep talking") as chat:
        try:
            assert chat.stdout is not None
            read: list[str] = []
            while len("".join(line.get("text", "") for line in json_lines("".join(read)))) <= 30:
                line = chat.stdout.readline()
                assert line, "the answer ended before it could be killed"
                read.append(line)
            kill(the_engine_of(chat.pid))
            out, err = rest_of(chat)
        finally:
            chat.kill()
    assert chat.returncode == 4, err
    lines = json_lines("".join(read) + out)
    assert lines[-1]["type"] == "error" and "stopped unexpectedly" in lines[-1]["message"], lines[-1]
    assert "Traceback" not in err
    streamed = "".join(line["text"] for line in lines if line["type"] == "delta")

    again = subprocess.run([sys.executable, "-m", "app", "chat", "--model", str(long_model), "--max-tokens", "8",
                            "--save", "Are you back?"], cwd=ROOT, capture_output=True, text=True,
                           encoding="utf-8", timeout=LIMIT_S)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() and "Traceback" not in again.stderr

    with HistoryStore(data_paths().history_db) as store:
        chats = sorted(store.list_conversations(), key=lambda c: c.id)
        kept = [[(m.role, m.state, m.text) for m in store.messages(c.id)] for c in chats]
    assert len(kept) == 2
    (asked, cut), (asked_again, answer) = kept
    assert asked[::2] == (Role.USER, "Keep talking") and asked_again[::2] == (Role.USER, "Are you back?")
    assert cut == (Role.ASSISTANT, MessageState.INTERRUPTED, streamed), "the cut answer is kept as it was shown"
    assert answer[:2] == (Role.ASSISTANT, MessageState.COMPLETE) and answer[2].strip()


# --- tools: `kestrel chat --tools` ---------------------------------------------------------

WAITING_CLOCK = Path(__file__).with_name("waiting_clock_server.py")


def test_cli_chat_with_a_tool_whose_engine_is_killed_during_the_call_is_answered_by_a_new_engine(
        tmp_path: Path, kestrel_home: Path) -> None:
    paths = data_paths().ensure()
    flags = tmp_path / "flags"
    flags.mkdir()
    write_mcp_config(paths.mcp_file, [McpServerConfig("clock", command=sys.executable,
                                                      args=(str(WAITING_CLOCK), str(flags)))])
    SettingsFile(paths.settings_file).save(Settings(tool_rounds=1))
    caller = build_tool_call_gguf(tmp_path / "caller.gguf")
    chat = kestrel_chat("--model", str(caller), "--tools", "clock", "--allow-tools", "get_time", "--json",
                        "--temperature", "0", "What time is it?")
    try:
        deadline = time.monotonic() + LIMIT_S
        while not (flags / "called").exists():
            assert time.monotonic() < deadline and chat.poll() is None, "the tool was never called"
            time.sleep(0.05)
        engine = the_engine_of(chat.pid)
        kill(engine)
        (flags / "go").touch()
        out, err = chat.communicate(timeout=LIMIT_S)
    finally:
        chat.kill()
    # The engine was gone before the tool answered, so what the model wrote after the result
    # came from a new one: the death cost not even this answer.
    assert chat.returncode == 0, err
    assert "Traceback" not in err
    lines = json_lines(out)
    kinds = [line["type"] for line in lines]
    assert kinds[-1] == "done" and "tool_result" in kinds, kinds
    result = kinds.index("tool_result")
    assert lines[result]["text"] == "12:00 in UTC"
    assert any(line["type"] == "delta" and line["text"].strip() for line in lines[result:]), kinds
