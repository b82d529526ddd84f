"""`kestrel ask` with no Kestrel running (issue 39): a question is answered here as `kestrel chat`
answers it; no question is said in words. With a Kestrel running: tests/ui/test_single_instance_line.py."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.core.instance_line import MAX_QUESTION_CHARS, server_name
from app.core.paths import data_paths
from app.core.settings import Settings, SettingsFile
from app.library.importer import import_model_file
from app.library.models import ModelLibrary

ROOT = Path(__file__).resolve().parents[2]
NOT_RUNNING = 'kestrel: Kestrel is not running: start it, or give a question (kestrel ask "…")\n'


@pytest.fixture(autouse=True)
def own_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary folder of the test's own (where a Kestrel's socket would be): a window another
    test or the person runs is never asked."""
    folder = Path(tempfile.mkdtemp(prefix="k39c-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(folder))
    yield folder
    shutil.rmtree(folder)


def kestrel(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, input=stdin, capture_output=True,
                          text=True, encoding="utf-8", timeout=120)


def install_default(model: Path) -> None:
    """The tiny model as this home's default, greedy, so two runs answer alike."""
    paths = data_paths().ensure()
    installed = import_model_file(ModelLibrary(paths.models), model)
    SettingsFile(paths.settings_file).save(Settings(default_model=installed.id, generation=GenerationSettings(
        max_tokens=12, temperature=0.0, context_length=512)))


def test_a_question_is_answered_here_as_chat_answers_it(tiny_model: Path) -> None:
    install_default(tiny_model)
    asked = kestrel("ask", "What is 2+2?")
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.strip(), "an answer was printed"
    assert "Traceback" not in asked.stderr
    chat = kestrel("chat", "What is 2+2?")
    assert (asked.stdout, asked.returncode) == (chat.stdout, chat.returncode), "the same one-shot path as chat"
    piped = kestrel("ask", "-", stdin="\n  What is 2+2?\n\n")
    assert (piped.returncode, piped.stdout) == (0, chat.stdout), "standard input, without the blank lines around it"


def test_no_question_and_no_kestrel_is_said_in_words() -> None:
    for args, stdin in ((("ask",), None), (("ask", "   "), None), (("ask", "-"), "")):
        result = kestrel(*args, stdin=stdin)
        assert (result.returncode, result.stdout, result.stderr) == (2, "", NOT_RUNNING), args


def test_a_socket_a_crashed_kestrel_left_is_not_running(own_tmp: Path) -> None:
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(own_tmp / server_name(data_paths())))  # as a killed window leaves it
    left.close()
    started = time.monotonic()
    result = kestrel("ask")
    assert (result.returncode, result.stderr) == (2, NOT_RUNNING)
    assert time.monotonic() - started < 20  # the start of a Python process; no 2-second wait in it


def test_a_question_past_the_bound_is_refused_before_anything() -> None:
    result = kestrel("ask", "-", stdin="x" * (MAX_QUESTION_CHARS + 1))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("kestrel: The question is 16,001 characters long; kestrel ask takes up to 16,000. For "
                             "longer text use kestrel chat - (it reads standard input).\n")


def test_help_says_to_bind_it_to_a_key() -> None:
    result = kestrel("ask", "--help")
    assert result.returncode == 0
    assert "bound to a key in the desktop's own keyboard settings" in " ".join(result.stdout.split())


@pytest.mark.skipif(os.name == "nt", reason="a Unix socket")
def test_a_kestrel_that_does_not_answer_is_said_and_the_question_answered_here(own_tmp: Path,
                                                                              tiny_model: Path) -> None:
    install_default(tiny_model)
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a window whose UI thread is stuck
    stuck.bind(str(own_tmp / server_name(data_paths())))
    stuck.listen()
    try:
        bare = kestrel("ask")
        assert bare.returncode == 1 and bare.stdout == ""
        assert bare.stderr.startswith("kestrel: Kestrel is running but did not answer within 2 seconds")
        asked = kestrel("ask", "What is 2+2?")
    finally:
        stuck.close()
    assert asked.returncode == 0 and asked.stdout.strip()
    assert "did not answer within 2 seconds" in asked.stderr and "Answering here instead." in asked.stderr


def test_summoning_imports_neither_the_service_nor_the_engine() -> None:
    """A key press runs `kestrel ask`: it must not first import every command (about 0.3 s)."""
    probe = ("import sys\nfrom app.__main__ import main\nstatus = main(['ask'])\n"
             "print(status, sorted(m for m in sys.modules if m.startswith(('app.service', 'app.engine', 'app.cli.chat'))"
             " and m != 'app.cli.chat_input'))")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.stdout == "2 []\n", result.stderr
