"""The catalog's speech models and voices: read from resources/catalog.json, downloaded from a real HTTP server on
127.0.0.1 standing in for Hugging Face (the files served are the real ones, from the shipped packages), checked by
their SHA-256, and then heard and spoken with by the same code as the shipped speech."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from app.library.catalog import CatalogEntryError
from app.library.download import DownloadError, DownloadOptions
from app.voice.protocol import TranscribeAsk
from app.voice.catalog.entries import (SpeechKind, as_speech_model, as_voice, load_speech_catalog, parse_speech_entry,
                                      speech_catalog)
from app.voice.catalog.fetch import fetch_speech, is_downloaded, remove_speech, speech_unit
from app.voice.catalog.choice import choose_speech_model, choose_voice, dictation_model, speech_models
from app.voice.speech_models import WHISPER_BASE, WHISPER_TINY_EN, SpeechModelError, ensure_speech_model
from app.voice.synthesis.voices import JOE, VoiceError, ensure_voice
from app.voice.transcriber import Transcriber
from tests.helpers.http_servers import TestServer, hugging_face_repo, sha256_of
from tests.helpers.speech import BECKETT, BECKETT_SAID, built_speech_folder, similarity

FAST = DownloadOptions(retry_delays=(0.01,), timeout_s=10.0, space_margin=0)
SAID = "The quick brown fox jumps over the lazy dog."


def entry_json(**changes: Any) -> dict[str, Any]:
    """A valid transcription entry, as the catalog writes one, with changes."""
    raw: dict[str, Any] = {
        "id": "whisper-test", "kind": "transcription", "name": "Whisper test", "publisher": "Kestrel's tests",
        "license": "MIT", "repo": "kestrel/whisper-test", "revision": "a" * 40, "parameters_millions": 39,
        "multilingual": False, "description": "For the tests.",
        "files": [{"path": name, "sha256": "0" * 64, "size": 1}
                  for name in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")]}
    raw.update(changes)
    return raw


def test_the_shipped_catalog_offers_its_speech_entries_without_a_problem() -> None:
    problems: list[str] = []
    entries = load_speech_catalog(problems=problems)
    assert problems == []
    kinds = {entry.kind for entry in entries}
    assert kinds == {SpeechKind.TRANSCRIPTION, SpeechKind.VOICE}
    assert {"whisper-small", "whisper-large-v3-turbo", "en_US-amy-medium"} <= {entry.id for entry in entries}
    for entry in entries:
        assert all(file.sha256 and file.size for file in entry.files), entry.id
        assert len(entry.revision) == 40
    assert speech_catalog() == entries  # what the app reads, once


def test_the_catalog_entry_for_whisper_base_is_the_shipped_model_file_for_file() -> None:
    """The installed app leaves base out and downloads it instead: the catalog's numbers (from public sources)
    must be the very files Kestrel computed from the PyPI packages, into the same folder."""
    entry = next(entry for entry in speech_catalog() if entry.id == WHISPER_BASE.id)
    downloaded = as_speech_model(entry)
    assert [(f.name, f.size, f.sha256) for f in downloaded.files] == \
        [(f.name, f.size, f.sha256) for f in WHISPER_BASE.files]
    assert WHISPER_BASE.id not in [model.id for model in speech_models()[2:]]  # listed once, as the shipped one


@pytest.mark.parametrize(("changes", "words"), [
    ({"revision": "main"}, "revision is not a full commit id"),
    ({"kind": "music"}, "kind 'music' is neither"),
    ({"repo": "../etc"}, "is not a Hugging Face owner/name"),
    ({"files": [{"path": "model.bin", "size": 1}]}, "model.bin does not state both its size and its SHA-256"),
    ({"files": [{"path": "model.bin", "sha256": "0" * 64, "size": 1}]}, "lists no config.json, tokenizer.json"),
    ({"parameters_millions": 0}, "parameters_millions is not a positive whole number"),
    ({"id": "a/b"}, "has characters other than"),
    ({"kind": "voice", "files": [{"path": "a.onnx.json", "sha256": "0" * 64, "size": 1},
                                 {"path": "a.onnx", "sha256": "0" * 64, "size": 1}]}, "its .onnx file, then"),
    ({"kind": "voice", "language": "de", "files": [{"path": "a.onnx", "sha256": "0" * 64, "size": 1},
                                                   {"path": "a.onnx.json", "sha256": "0" * 64, "size": 1}]},
     "Kestrel reads English only"),
])
def test_a_damaged_entry_is_refused_in_words(changes: dict[str, Any], words: str) -> None:
    with pytest.raises(CatalogEntryError, match=words):
        parse_speech_entry(entry_json(**changes))


def test_a_damaged_entry_is_skipped_and_the_others_kept(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"version": 1, "models": [], "speech": [
        entry_json(revision="main"), entry_json(), entry_json()]}), encoding="utf-8")
    problems: list[str] = []
    entries = load_speech_catalog(catalog, problems)
    assert [entry.id for entry in entries] == ["whisper-test"]
    assert problems == ["Speech entry 1 was skipped: revision is not a full commit id (40 lowercase hexadecimal "
                        "digits).", "Speech entry 3 was skipped: the id 'whisper-test' is taken."]
    missing: list[str] = []
    assert load_speech_catalog(tmp_path / "gone.json", missing) == ()
    assert len(missing) == 1 and "could not be read" in missing[0] and "no speech model is offered" in missing[0]


def test_a_catalog_model_is_chosen_by_id_and_says_where_to_get_it_until_downloaded(tmp_path: Path) -> None:
    small = choose_speech_model("Whisper-Small", "de")
    assert small.id == "whisper-small" and small.multilingual and small.repo == "Systran/faster-whisper-small"
    with pytest.raises(SpeechModelError,
                       match=r"Whisper small.en \(English\) transcribes English only.*\(whisper-base, whisper-small, "):
        choose_speech_model("whisper-small.en", "fr")
    with pytest.raises(SpeechModelError, match="not downloaded. Download it in Models → Speech, or run: "
                                               "kestrel models get whisper-small"):
        ensure_speech_model(small, tmp_path)
    # Settings → Voice's choice is used where it can hear the language, else the language's own choice stands.
    assert dictation_model("de", None, "whisper-small") == (small, "de")
    assert dictation_model("de", None, "whisper-small.en") == (WHISPER_BASE, "de")
    assert dictation_model("en", None, "whisper-small.en")[0].id == "whisper-small.en"
    assert dictation_model("en", None, "no-such-model") == (WHISPER_TINY_EN, "en")


def test_a_catalog_voice_is_chosen_by_id_and_says_where_to_get_it_until_downloaded(tmp_path: Path) -> None:
    amy = choose_voice("en_us-amy-medium")
    assert amy.id == "en_US-amy-medium" and amy.repo == "rhasspy/piper-voices"
    assert choose_voice("alloy") is JOE
    with pytest.raises(VoiceError, match="not downloaded. Download it in Models → Speech, or run: kestrel models "
                                         "get en_US-amy-medium"):
        ensure_voice(amy, tmp_path)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny.en, the voice and base put together from their packages once for this module (the bytes served)."""
    folder = built_speech_folder(tmp_path_factory.mktemp("speech-built"))
    ensure_speech_model(WHISPER_BASE, folder)
    return folder


def test_the_catalog_whisper_base_downloads_checked_and_transcribes(
        built: Path, server: TestServer, storage: TestServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The real catalog entry, its real bytes: every stated SHA-256 holds, and the folder it lands in is the one the
    shipped base is looked for in, so the transcriber hears with it."""
    entry = next(entry for entry in speech_catalog() if entry.id == WHISPER_BASE.id)
    hugging_face_repo(server, storage, entry.repo,
                      {file.path: (built / WHISPER_BASE.id / file.path).read_bytes() for file in entry.files},
                      revision=entry.revision)
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    speech = tmp_path / "speech"
    fetched = fetch_speech(speech, speech_unit(entry), options=FAST)
    assert fetched.folder == speech / "whisper-base" and not fetched.already_installed
    assert all(file.verified_sha256 for file in fetched.files)
    assert sorted(path.name for path in speech.iterdir()) == [".whisper-base.download.lock", "whisper-base"]
    assert is_downloaded(entry, speech)
    transcriber = Transcriber(WHISPER_BASE, speech)
    try:
        transcript = transcriber.transcribe(TranscribeAsk(BECKETT.read_bytes(), language="en"))
    finally:
        transcriber.close()
    assert similarity(transcript.text, BECKETT_SAID) >= 0.8, transcript.text
    again = fetch_speech(speech, speech_unit(entry), options=FAST)
    assert again.already_installed and len(server.requests("GET")) == len(entry.files)  # nothing fetched twice


def test_a_file_that_is_not_what_the_catalog_states_leaves_nothing_in_place(
        built: Path, server: TestServer, storage: TestServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's answer has other bytes (a changed repository, a proxy): the download stops before a byte of the
    model is used, and the model stays not downloaded."""
    entry = next(entry for entry in speech_catalog() if entry.id == "whisper-base.en")
    files = {file.path: b"not the model" for file in entry.files}
    hugging_face_repo(server, storage, entry.repo, files, revision=entry.revision)
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    with pytest.raises(DownloadError) as refused:
        fetch_speech(tmp_path, speech_unit(entry), options=FAST)
    assert "different" in refused.value.message or "SHA-256" in refused.value.message, refused.value.message
    assert not is_downloaded(entry, tmp_path) and not (tmp_path / entry.id).exists()


def test_a_catalog_voice_downloads_and_speaks(built: Path, server: TestServer, storage: TestServer, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A voice entry served with a real Piper voice's files (Joe's, under the entry's own names and checksums):
    downloaded, its config read, then spoken with and heard back."""
    from app.voice.synthesis.synthesizer import Synthesizer, wav_file
    joe = built / JOE.bundle.id
    model, config = (joe / JOE.model_file).read_bytes(), (joe / JOE.config_file).read_bytes()
    folder = "en/en_US/test/medium"
    raw = entry_json(id="en_US-test-medium", kind="voice", name="Test (U.S. English)", repo="rhasspy/piper-voices",
                     files=[{"path": f"{folder}/en_US-test-medium.onnx", "sha256": sha256_of(model), "size": len(model)},
                            {"path": f"{folder}/en_US-test-medium.onnx.json", "sha256": sha256_of(config),
                             "size": len(config)}])
    entry = parse_speech_entry(raw)
    hugging_face_repo(server, storage, entry.repo, {
        f"{folder}/en_US-test-medium.onnx": model, f"{folder}/en_US-test-medium.onnx.json": config},
        revision=entry.revision)
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    speech = tmp_path / "speech"
    shutil.copytree(built / "english-g2p", speech / "english-g2p")
    fetched = fetch_speech(speech, speech_unit(entry), options=FAST)
    assert fetched.folder == speech / "voice-en_US-test-medium"
    voice = as_voice(entry)
    assert ensure_voice(voice, speech) == fetched.folder
    synthesizer = Synthesizer(speech)
    try:
        spoken = list(synthesizer.speak(SAID, voice))
    finally:
        synthesizer.close()
    assert spoken and sum(sentence.seconds for sentence in spoken) > 0.5
    transcriber = Transcriber(WHISPER_TINY_EN, built)
    try:
        heard = transcriber.transcribe(TranscribeAsk(wav_file(spoken)))
    finally:
        transcriber.close()
    assert similarity(heard.text, SAID) >= 0.8, heard.text
    remove_speech(entry, speech)
    assert not is_downloaded(entry, speech)


def test_a_voice_whose_config_is_not_pipers_is_deleted_with_words(server: TestServer, storage: TestServer,
                                                                   tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from app.voice.catalog.fetch import SpeechFetchRefused
    model, config = b"onnx bytes", b'{"audio": {}}'
    raw = entry_json(id="en_US-odd-medium", kind="voice", files=[
        {"path": "en_US-odd-medium.onnx", "sha256": sha256_of(model), "size": len(model)},
        {"path": "en_US-odd-medium.onnx.json", "sha256": sha256_of(config), "size": len(config)}])
    entry = parse_speech_entry(raw)
    hugging_face_repo(server, storage, entry.repo,
                      {"en_US-odd-medium.onnx": model, "en_US-odd-medium.onnx.json": config}, revision=entry.revision)
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    with pytest.raises(SpeechFetchRefused, match="is not a Piper voice's configuration; the download was deleted"):
        fetch_speech(tmp_path, speech_unit(entry), options=FAST)
    assert sorted(path.name for path in tmp_path.iterdir()) == [".voice-en_US-odd-medium.download.lock"]


def test_the_whisper_files_the_catalog_shares_are_the_shipped_ones() -> None:
    """tokenizer.json and vocabulary.txt are the same bytes across Whisper's sizes up to medium (one pair for the
    English-only models, one for the multilingual): the catalog's numbers for them agree with the packages' (a typo
    in a copied checksum would show here)."""
    shipped = {(f.name, f.size, f.sha256) for model in (WHISPER_TINY_EN, WHISPER_BASE) for f in model.files}
    checked = 0
    for entry in speech_catalog():
        if any(file.path == "vocabulary.json" for file in entry.files):
            continue  # large-v3 and its turbo: another tokenizer (128 mel bins, a new language token)
        for file in entry.files:
            if file.path in ("tokenizer.json", "vocabulary.txt"):
                assert (file.path, file.size, file.sha256) in shipped, (entry.id, file.path)
                checked += 1
    assert checked == 12  # base, base.en, small, small.en, medium, medium.en: two files each

