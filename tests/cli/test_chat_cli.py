"""`python -m app chat` as a user runs it: real processes, exit statuses, no tracebacks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from app import __version__
from app.library.starter import STARTER_PACKAGE_PREFIX
from tests.helpers.models import truncated_copy

ROOT = Path(__file__).resolve().parents[2]


def kestrel(*args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, encoding="utf-8", timeout=timeout)


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def assert_no_traceback(result: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout


def test_version() -> None:
    result = kestrel("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"Kestrel {__version__}"


def test_json_stream_then_stats(tiny_model: Path) -> None:
    result = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "16", "--temperature", "0",
                     "--ctx", "512", "--json", "Hello")
    assert result.returncode == 0, result.stderr
    lines = json_lines(result.stdout)
    deltas, final = lines[:-1], lines[-1]
    assert len(deltas) >= 2 and all(d["type"] == "delta" and d["text"] for d in deltas)
    for key in ("ttft_ms", "tokens", "tokens_per_s", "prompt_tokens", "prompt_tokens_evaluated",
                "device", "finish_reason"):
        assert key in final
    assert final["type"] == "done" and final["tokens"] == 16 and final["finish_reason"] == "length"
    assert list(final) == ["type", "ttft_ms", "tokens", "tokens_per_s", "prompt_tokens", "prompt_tokens_evaluated",
                           "device", "finish_reason", "chat_format", "total_ms", "messages_left_out",
                           "template_note", "thinking_ms", "threads"]
    assert final["device"] == "CPU"
    assert_no_traceback(result)


def test_plain_output_and_prompt_from_stdin(tiny_model: Path) -> None:
    result = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "8", "--ctx", "512",
                     "--system", "Be brief.", "-", stdin="Hello from stdin")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("\n") and len(result.stdout.strip()) > 0


@pytest.mark.parametrize("args", [
    ["chat"],
    ["chat", "--model", "{model}", "--max-tokens", "lots", "hi"],
    ["chat", "--model", "{model}", "--temperature", "9", "hi"],
    ["chat", "--model", "{model}", "   "],
    ["nonsense"],
])
def test_bad_usage_exits_2(args: list[str], tiny_model: Path) -> None:
    result = kestrel(*(a.replace("{model}", str(tiny_model)) for a in args))
    assert result.returncode == 2, result.stderr
    assert_no_traceback(result)


def _noise(folder: Path, model: Path) -> Path:
    path = folder / "random bytes.gguf"
    path.write_bytes(os.urandom(100_000))
    return path


def _empty(folder: Path, model: Path) -> Path:
    path = folder / "empty.gguf"
    path.write_bytes(b"")
    return path


@pytest.mark.parametrize("make, words", [
    (lambda d, m: d / "does not exist.gguf", "does not exist"),
    (_empty, "empty"),
    (_noise, "not a GGUF"),
    (lambda d, m: truncated_copy(m, d / "cut.gguf", 0.7), "incomplete"),
])
def test_unusable_model_files_exit_3_with_a_clear_message(tiny_model: Path, tmp_path: Path, make, words) -> None:
    bad = make(tmp_path, tiny_model)
    result = kestrel("chat", "--model", str(bad), "hi", timeout=60)
    assert result.returncode == 3, result.stderr
    assert words.lower() in result.stderr.lower()
    assert bad.name in result.stderr
    assert_no_traceback(result)


def test_prompt_longer_than_the_context_exits_5_with_counts(tiny_model: Path) -> None:
    result = kestrel("chat", "--model", str(tiny_model), "--ctx", "256", "the cat sat " * 300)
    assert result.returncode == 5, result.stderr
    assert "but the context holds 256" in result.stderr
    assert_no_traceback(result)


def test_no_model_and_no_starter_says_how_to_get_one(tmp_path: Path) -> None:
    # Hide the starter's chunk packages so the default-model path finds nothing.
    env = dict(os.environ, PYTHONPATH=str(ROOT), KESTREL_HOME=str(tmp_path / "home"))
    code = ("import importlib.util as u, sys; real = u.find_spec; "
            f"u.find_spec = lambda n, *a: None if n.startswith({STARTER_PACKAGE_PREFIX!r}) else real(n, *a); "
            "from app.__main__ import main; sys.exit(main(['chat', 'hi']))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 3
    assert "No model is installed" in result.stderr and "--model" in result.stderr


def test_ctrl_c_cancels_cleanly_and_exits_130(tiny_model: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "chat", "--model", str(tiny_model), "--max-tokens", "100000",
         "--ctx", "2048", "--json", "Hello"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        assert json.loads(first)["type"] == "delta"
        children = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    deadline = time.monotonic() + 10
    while any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children):
        assert time.monotonic() < deadline, "the engine process outlived the CLI"
        time.sleep(0.1)


def test_an_onnx_model_folder_streams_through_the_same_command() -> None:
    folder = ROOT / "tests" / "fixtures" / "tiny-onnx"
    result = kestrel("chat", "--model", str(folder), "--max-tokens", "8", "--ctx", "512", "--json", "Hello")
    assert result.returncode == 0, result.stderr
    final = json_lines(result.stdout)[-1]
    assert final["device"] == "CPU (ONNX Runtime)" and final["tokens"] == 8


def test_a_device_the_machine_lacks_exits_6_with_the_reason(tiny_model: Path) -> None:
    result = kestrel("chat", "--model", str(tiny_model), "--device", "npu", "hi")
    assert result.returncode == 6, result.stderr
    assert "NPU" in result.stderr
    assert_no_traceback(result)


@pytest.mark.parametrize("as_json", [False, True])
def test_a_broken_chat_template_falls_back_and_says_so(tmp_path: Path, as_json: bool) -> None:
    from tests.helpers.tiny_gguf import build_tiny_gguf

    model = build_tiny_gguf(tmp_path / "bad template.gguf", chat_template="{{ 'x' * 10**9 }}")
    result = kestrel("chat", "--model", str(model), "--max-tokens", "4", *(["--json"] if as_json else []), "Hi")
    assert result.returncode == 0, result.stderr
    assert_no_traceback(result)
    note = ("kestrel: The model's chat template was stopped: it tried to repeat text of at least "
            "1,000,000,000 characters, more than a chat prompt can use; Kestrel used its built-in "
            "ChatML format instead.")
    if as_json:
        done = json_lines(result.stdout)[-1]
        assert done["chat_format"] == "chatml" and done["template_note"] == note.removeprefix("kestrel: ")
    else:
        assert note in result.stderr.splitlines()


def test_a_damaged_settings_file_is_set_aside_with_a_word(tiny_model: Path) -> None:
    """Before, chat moved it aside silently."""
    from app.core.paths import data_paths

    path = data_paths().ensure().settings_file
    path.write_bytes(b"{ not json")
    result = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "4", "Hi")
    assert result.returncode == 0, result.stderr
    assert "settings file was damaged" in result.stderr and ".bad-" in result.stderr
    assert_no_traceback(result)


def test_a_settings_file_from_a_newer_kestrel_is_left_alone_and_said(tiny_model: Path) -> None:
    from app.core.paths import data_paths

    path = data_paths().ensure().settings_file
    path.write_text(json.dumps({"version": 99, "theme": "dark", "from_the_future": {"x": 1}}), encoding="utf-8")
    before = path.read_bytes()
    result = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "4", "Hi")
    assert result.returncode == 0, result.stderr
    assert "comes from a newer version of Kestrel" in result.stderr
    assert path.read_bytes() == before


def test_save_keeps_the_exchange_as_a_new_chat_and_without_it_nothing_is_written(tiny_model: Path) -> None:
    """`chat --save` writes to the user's history (the window picks it up); a plain `chat` leaves no file."""
    from app.core.store.history import HistoryStore
    from app.core.paths import data_paths

    history = data_paths().history_db
    plain = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "4", "--ctx", "512", "Not kept")
    assert plain.returncode == 0, plain.stderr
    assert not history.exists()
    for prompt in ("Kept once", "Kept twice"):
        saved = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "4", "--ctx", "512", "--save", prompt)
        assert saved.returncode == 0, saved.stderr
    store = HistoryStore(history)
    try:
        chats = store.list_conversations()
        assert len(chats) == 2  # each --save is a chat of its own, never added to the last one
        kept = [store.messages(chat.id) for chat in chats]
    finally:
        store.close()
    assert sorted(messages[0].text for messages in kept) == ["Kept once", "Kept twice"]
    assert all(len(messages) == 2 and messages[1].text for messages in kept)


def test_with_other_programs_keeping_the_cores_busy_chat_decodes_with_the_one_they_leave(tiny_model: Path) -> None:
    # `kestrel chat` used every core on a busy 2-core machine and ran up to 25x slower than with one thread,
    # while the window picked one: the same advisor must see the busy cores on the CLI's single answer.
    cores = psutil.cpu_count(logical=False) or 1
    if cores < 2:
        pytest.skip("one core: there is nothing to leave free")
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores - 1)]
    try:
        time.sleep(0.5)  # busy before Kestrel starts measuring
        result = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "4", "--temperature", "0",
                         "--ctx", "512", "--json", "Hello")
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert result.returncode == 0, result.stderr
    assert json_lines(result.stdout)[-1]["threads"] == 1
