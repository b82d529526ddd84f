"""`kestrel models catalog --speech` and `kestrel models get <speech id>` as a user runs them: real processes, a real
HTTP server on 127.0.0.1 as Hugging Face (HF_ENDPOINT), then `kestrel transcribe --model` with what came down."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from app.core.paths import data_paths
from app.voice.catalog.entries import speech_catalog
from app.voice.speech_models import WHISPER_BASE, ensure_speech_model
from tests.cli.test_chat_cli import kestrel
from tests.helpers.http_servers import TestServer, hugging_face_repo
from tests.helpers.speech import BECKETT, BECKETT_SAID, similarity, voice_or_skip


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    result = kestrel(*args, timeout=timeout)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    return result


def test_the_speech_catalog_lists_what_ships_and_what_is_offered_with_a_verdict() -> None:
    text, as_json = run("models", "catalog", "--speech"), run("models", "catalog", "--speech", "--json")
    assert text.returncode == as_json.returncode == 0, text.stderr
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    by_id = {row["id"]: row for row in rows}
    assert by_id["en_US-joe-medium"]["state"] == "shipped" and by_id["en_US-joe-medium"]["in_use"]
    assert by_id["whisper-tiny.en"]["in_use"] and by_id["whisper-tiny.en"]["kind"] == "transcription"
    assert {entry.id for entry in speech_catalog()} <= set(by_id)
    small = by_id["whisper-small"]
    assert small["state"] == "offered" and small["languages"] == "99 languages" and small["license"] == "MIT"
    assert small["verdict"] in ("good", "slow", "too_slow", "too_big") and small["real_time_factor"] > 0
    # Bigger is judged slower, on this machine as on any.
    assert by_id["whisper-large-v3"]["real_time_factor"] > small["real_time_factor"] > \
        by_id["whisper-tiny.en"]["real_time_factor"]
    [small_line] = [line for line in text.stdout.splitlines() if line.startswith("whisper-small ")]
    assert small_line.split() == ["whisper-small", "speech", "to", "text", "486.2", "MB", "99", "languages", "get",
                                  "it:", "kestrel", "models", "get", "whisper-small"]
    assert f"about {small['real_time_factor']:.2f} s of work for each second of speech, an estimate" in text.stdout


def test_get_downloads_a_speech_model_that_transcribe_then_hears_with(
        server: TestServer, storage: TestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalog's whisper-base, served with its real files (put together from the packages here): downloaded and
    checked by the command, then used by `kestrel transcribe --model`."""
    voice_or_skip()
    folder = ensure_speech_model(WHISPER_BASE, tmp_path / "built")
    entry = next(entry for entry in speech_catalog() if entry.id == "whisper-base")
    hugging_face_repo(server, storage, entry.repo, {file.path: (folder / file.path).read_bytes() for file in entry.files},
                      revision=entry.revision)
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    got = run("models", "get", "whisper-base")
    assert got.returncode == 0 and got.stdout == "whisper-base\n", got.stderr
    assert "every file's SHA-256 was checked. Use it with: kestrel transcribe FILE --model whisper-base" in got.stderr
    assert sorted(p.name for p in (data_paths().data / "speech" / "whisper-base").iterdir()) == \
        sorted(file.path for file in entry.files)
    again = run("models", "get", "whisper-base")
    assert again.returncode == 0 and "is already downloaded" in again.stderr
    heard = run("transcribe", str(BECKETT), "--model", "whisper-base", "--language", "en")
    assert heard.returncode == 0 and similarity(heard.stdout, BECKETT_SAID) >= 0.8, heard.stderr


def test_get_refuses_what_is_not_the_catalog_s_file_and_keeps_nothing(
        server: TestServer, storage: TestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = next(entry for entry in speech_catalog() if entry.id == "whisper-small.en")
    hugging_face_repo(server, storage, entry.repo, {file.path: b"something else" for file in entry.files},
                      revision=entry.revision)
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    refused = run("models", "get", "whisper-small.en")
    assert refused.returncode != 0 and refused.stdout == ""
    assert "model.bin" in refused.stderr and "catalog" in refused.stderr, refused.stderr
    assert not (data_paths().data / "speech" / "whisper-small.en").exists()
    unknown = run("transcribe", str(BECKETT), "--model", "whisper-small.en")
    assert unknown.returncode != 0 and "not downloaded" in unknown.stderr and \
        "kestrel models get whisper-small.en" in unknown.stderr, unknown.stderr
