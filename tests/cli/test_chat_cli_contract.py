"""`python -m app chat` when the input, the model path or the run goes wrong: real processes.

Each test here stands for a defect of issue 9 (8, 9 and 10): bad input reported as the
wrong thing, paths that hang or crash, and the CLI's promises (exit statuses, JSON on
every stdout line under --json, flags named as the user typed them, no traceback).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.cli.test_chat_cli import ROOT, assert_no_traceback, kestrel

TINY_ONNX = ROOT / "tests" / "fixtures" / "tiny-onnx"


def kestrel_bytes(*args: str | bytes, stdin: bytes = b"", timeout: float = 60) -> subprocess.CompletedProcess:
    """kestrel() with raw bytes in: stdin, and arguments that may not be UTF-8."""
    result = subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, input=stdin,
                            capture_output=True, timeout=timeout)
    return subprocess.CompletedProcess(result.args, result.returncode,
                                       result.stdout.decode("utf-8", "replace"),
                                       result.stderr.decode("utf-8", "replace"))


def _set_uint32(source: Path, target: Path, key: str, value: int) -> Path:
    """A copy of a GGUF with the uint32 setting `key` changed in place, as a bit flip does."""
    data = bytearray(source.read_bytes())
    at = data.index(key.encode()) + len(key)
    assert struct.unpack_from("<I", data, at)[0] == 4  # GGUF type 4: uint32
    struct.pack_into("<I", data, at + 4, value)
    target.write_bytes(data)
    return target


# --- Defect 8: bad input reported as the wrong thing -----------------------------------

@pytest.mark.parametrize("data", [b"caf\xe9 au lait\n", b"\x80\x81\x82", b"ok \xed\xa0\x80 surrogate"])
def test_stdin_that_is_not_utf8_is_bad_usage(tiny_model: Path, data: bytes) -> None:
    result = kestrel_bytes("chat", "--model", str(tiny_model), "-", stdin=data)

    assert result.returncode == 2, result.stderr
    assert "Standard input is not UTF-8 text" in result.stderr
    assert "UnicodeEncodeError" not in result.stderr
    assert_no_traceback(result)


def test_a_byte_order_mark_alone_is_empty_input(tiny_model: Path) -> None:
    # \xff\xfe is the UTF-16 byte-order mark (what Windows PowerShell 5 writes first):
    # nothing follows it, so there is no message to send.
    result = kestrel_bytes("chat", "--model", str(tiny_model), "-", stdin=b"\xff\xfe")

    assert result.returncode == 2, result.stderr
    assert "Standard input was empty" in result.stderr
    assert_no_traceback(result)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig"])
def test_text_with_a_byte_order_mark_is_read(tiny_model: Path, encoding: str) -> None:
    result = kestrel_bytes("chat", "--model", str(tiny_model), "--max-tokens", "2", "--json", "-",
                           stdin="Grüße 👋".encode(encoding))

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["prompt_tokens"] > 0


@pytest.mark.skipif(os.name == "nt", reason="Windows passes arguments as Unicode, never as raw bytes")
@pytest.mark.parametrize("where", ["prompt", "system"])
def test_an_argument_that_is_not_utf8_is_bad_usage(tiny_model: Path, where: str) -> None:
    bad = b"caf\xe9"
    args = ["--system", bad, "hi"] if where == "system" else [bad]
    result = kestrel_bytes("chat", "--model", str(tiny_model), *args)

    assert result.returncode == 2, result.stderr
    assert "not UTF-8 text" in result.stderr
    assert ("--system" in result.stderr) == (where == "system")
    assert_no_traceback(result)


def _invalid_utf8(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[len(data) // 2] = 0xFF
    file.write_bytes(bytes(data))


def _cut_in_half(file: Path) -> None:
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])


@pytest.mark.parametrize("damage", [_invalid_utf8, _cut_in_half, lambda f: f.write_bytes(b"")],
                         ids=["not-utf8", "cut", "empty"])
def test_a_damaged_onnx_tokenizer_says_which_file(tmp_path: Path, damage) -> None:
    folder = Path(shutil.copytree(TINY_ONNX, tmp_path / "tiny onnx"))
    damage(folder / "tokenizer.json")

    result = kestrel("chat", "--model", str(folder), "hi", timeout=60)

    assert result.returncode == 3, result.stderr
    assert "tokenizer.json" in result.stderr and "damaged" in result.stderr
    assert '"tiny onnx"' in result.stderr and "Download the model again" in result.stderr
    assert "UnicodeDecodeError" not in result.stderr
    assert_no_traceback(result)


@pytest.mark.parametrize("value", [2**31, 0x8000_0800, 2**32 - 1])
def test_an_impossible_context_length_is_a_damaged_file(tiny_model: Path, tmp_path: Path, value: int) -> None:
    # 0x80000800 is the tiny model's 2048 with its top bit flipped: one damaged byte.
    bad = _set_uint32(tiny_model, tmp_path / "flipped.gguf", "llama.context_length", value)

    result = kestrel("chat", "--model", str(bad), "hi", timeout=60)

    assert result.returncode == 3, result.stderr
    assert '"flipped.gguf" is damaged' in result.stderr
    assert "llama.context_length" in result.stderr and f"{value:,}" in result.stderr
    assert "Array length" not in result.stderr
    assert_no_traceback(result)


# --- Defect 9: paths -------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.parametrize("name", ["x.gguf", "model"])
def test_a_named_pipe_is_refused_at_once(tmp_path: Path, name: str) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)

    result = kestrel("chat", "--model", str(fifo), "hi", timeout=30)

    assert result.returncode == 3, result.stderr
    assert "not a regular file" in result.stderr and "named pipe" in result.stderr
    assert str(fifo) in result.stderr
    assert_no_traceback(result)


@pytest.mark.skipif(os.name == "nt", reason="symbolic links need extra rights on Windows")
def test_a_symlink_loop_is_a_clear_message(tmp_path: Path) -> None:
    (tmp_path / "a.gguf").symlink_to(tmp_path / "b.gguf")
    (tmp_path / "b.gguf").symlink_to(tmp_path / "a.gguf")

    result = kestrel("chat", "--model", str(tmp_path / "a.gguf"), "hi", timeout=30)

    assert result.returncode == 3, result.stderr
    assert "loop" in result.stderr and "a.gguf" in result.stderr
    assert_no_traceback(result)


def test_a_folder_that_is_no_model(tmp_path: Path) -> None:
    folder = tmp_path / "my documents"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello", encoding="utf-8")

    result = kestrel("chat", "--model", str(folder), "hi", timeout=30)

    assert result.returncode == 3, result.stderr
    assert '"my documents" is not a model Kestrel can run' in result.stderr
    assert_no_traceback(result)


# --- Defect 10: the CLI's contract -----------------------------------------------------

def test_json_lines_stay_json_when_the_engine_dies(tiny_model: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "chat", "--model", str(tiny_model), "--max-tokens", "100000",
         "--ctx", "2048", "--json", "Hello"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")
    try:
        first = proc.stdout.readline()
        engines = [c for c in psutil.Process(proc.pid).children()
                   if "--multiprocessing-fork" in c.cmdline()]
        assert len(engines) == 1
        engines[0].kill()
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()

    assert proc.returncode == 4, err
    lines = (first + out).splitlines()
    objects = [json.loads(line) for line in lines]  # every line, blank ones included
    assert objects[-1]["type"] == "error" and objects[-1]["status"] == 4
    assert all(o["type"] == "delta" for o in objects[:-1])


_INTERRUPT_DURING_IMPORT = """
import os, runpy, signal, sys

WHEN_IMPORTING, MODEL = sys.argv[1:]

class InterruptOnImport:
    def find_spec(self, name, path=None, target=None):
        if name == WHEN_IMPORTING:
            os.kill(os.getpid(), signal.SIGINT)  # as if Ctrl+C came while this loads
        return None

sys.meta_path.insert(0, InterruptOnImport())
sys.argv = ["kestrel", "chat", "--model", MODEL, "hi"]
runpy.run_module("app", run_name="__main__", alter_sys=True)
"""


@pytest.mark.skipif(os.name == "nt", reason="os.kill(SIGINT) is not Ctrl+C on Windows")
@pytest.mark.parametrize("module", ["argparse", "multiprocessing", "asyncio", "app.cli.chat",
                                    "app.service.root", "app.cli.chat_documents"])
def test_ctrl_c_while_starting_exits_130_quietly(tiny_model: Path, module: str) -> None:
    result = subprocess.run([sys.executable, "-c", _INTERRUPT_DURING_IMPORT, module, str(tiny_model)],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert result.returncode == 130, result.stderr
    assert result.stderr.strip() == "Interrupted."
    assert result.stdout == ""


@pytest.mark.parametrize("args, flag, field", [
    (["--max-tokens", "0"], "--max-tokens", "max_tokens"),
    (["--ctx", "100"], "--ctx", "context_length"),
    (["--ctx", "99999999"], "--ctx", "context_length"),
    (["--temperature", "-1"], "--temperature", None),
])
def test_bad_values_are_named_by_their_flag(tiny_model: Path, args: list[str], flag: str,
                                            field: str | None) -> None:
    result = kestrel("chat", "--model", str(tiny_model), *args, "hi", timeout=60)

    assert result.returncode == 2, result.stderr
    assert f"{flag} {args[1]}" in result.stderr
    if field:
        assert field not in result.stderr
    assert_no_traceback(result)


def test_a_prompt_too_long_for_the_context_names_the_flag(tiny_model: Path) -> None:
    result = kestrel("chat", "--model", str(tiny_model), "--ctx", "256", "the cat sat " * 300)

    assert result.returncode == 5, result.stderr
    assert "but the context holds 256" in result.stderr
    assert "--ctx" in result.stderr and "settings" not in result.stderr
    assert_no_traceback(result)


@pytest.mark.parametrize("stdin", ["", "  \n\n"])
def test_empty_stdin_says_that_stdin_was_empty(tiny_model: Path, stdin: str) -> None:
    result = kestrel("chat", "--model", str(tiny_model), "-", stdin=stdin, timeout=60)

    assert result.returncode == 2, result.stderr
    assert "Standard input was empty" in result.stderr
    assert "or -" not in result.stderr
    assert_no_traceback(result)


def _logical_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def test_more_threads_than_cpus_are_capped_with_a_warning(tiny_model: Path) -> None:
    cpus = _logical_cpus()
    result = kestrel("chat", "--model", str(tiny_model), "--max-tokens", "4", "--threads", "1000",
                     "hi", timeout=60)

    assert result.returncode == 0, result.stderr
    cpu_word = "CPU" if cpus == 1 else "CPUs"
    assert (f"kestrel: --threads 1000 is more than the {cpus} logical {cpu_word} Kestrel may use "
            f"here; using {cpus}.") in result.stderr.splitlines()


@pytest.mark.parametrize("threads", ["0", "-3"])
def test_threads_below_one_is_bad_usage(tiny_model: Path, threads: str) -> None:
    result = kestrel("chat", "--model", str(tiny_model), "--threads", threads, "hi", timeout=60)

    assert result.returncode == 2, result.stderr
    assert f"--threads {threads}" in result.stderr
    assert_no_traceback(result)
