"""`models get` against hostile listings and a tampered part (issue 28), as a user runs it: real
processes, real HTTP servers on 127.0.0.1, never the internet."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.core.paths import data_paths
from tests.cli.test_chat_cli import ROOT, kestrel
from tests.helpers.http_servers import Served, TestServer, hugging_face_repo, sha256_of


def get(*args: str) -> subprocess.CompletedProcess:
    return kestrel("models", "get", *args, timeout=60)


def assert_plain(result: subprocess.CompletedProcess) -> None:
    message = result.stderr
    assert "Traceback" not in message and "Error" not in message, message
    assert 0 < len(message) < 1000, f"a message of {len(message)} characters"
    assert "space" not in message, "no disk-space advice for a problem that is not one"


def test_a_listing_nested_deep_is_refused_in_words(server: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.files["/api/models/o/deep?blobs=true"] = Served(body=b'{"siblings": ' + b"[" * 400_000
                                                           + b"]" * 400_000 + b"}")
    monkeypatch.setenv("HF_ENDPOINT", server.base)

    result = get("o/deep")

    assert result.returncode == 7 and "did not answer with a list of a repository's files" in result.stderr
    assert_plain(result)


@pytest.mark.parametrize("name, words", [
    ("tiny\0.gguf", "holds a control character"),
    ("x" * 5000 + ".gguf", "longer than the 200 bytes"),
    ("tiny\u202efggu.exe.gguf", "direction mark"),
    ("LPT1.gguf", "a name Windows keeps for a device"),
])
def test_a_listing_name_kestrel_will_not_save_is_refused_in_words(
        server: TestServer, storage: TestServer, monkeypatch: pytest.MonkeyPatch, name: str, words: str) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hugging_face_repo(server, storage, "o/bad", {name: b"GGUF"}))

    result = get("o/bad")

    assert result.returncode == 3 and words in result.stderr and result.stdout == ""
    assert_plain(result)
    assert "\0" not in result.stderr and "\u202e" not in result.stderr
    models = data_paths().models
    assert not models.exists() or list(models.iterdir()) == []


def test_a_part_replaced_by_a_link_is_not_written_through(server: TestServer, tiny_model: Path,
                                                          tmp_path: Path) -> None:
    body = tiny_model.read_bytes()
    server.files["/files/tiny.gguf"] = Served(body=body, linked_sha256=sha256_of(body), slow_chunk=16 * 1024,
                                              slow_delay_s=0.2)
    url = server.url("/files/tiny.gguf")
    proc = subprocess.Popen([sys.executable, "-m", "app", "models", "get", url], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        part = _wait_for_part(time.monotonic())
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    other = tmp_path / "someone else's.txt"
    other.write_bytes(b"k" * 1221)
    part.unlink()
    part.symlink_to(other)
    server.files["/files/tiny.gguf"].slow_delay_s = 0.0

    result = get(url)

    assert other.read_bytes() == b"k" * 1221, "the link's target was appended to"
    assert result.returncode == 0, result.stderr
    installed = data_paths().models / "tiny" / "tiny.gguf"
    assert installed.read_bytes() == body and not installed.is_symlink()


def _wait_for_part(started: float) -> Path:
    while True:
        parts = list(data_paths().models.glob("*/*.part"))
        if parts and parts[0].stat().st_size and time.monotonic() - started > 1.5:
            return parts[0]
        assert time.monotonic() - started < 20, "the download never started"
        time.sleep(0.05)
