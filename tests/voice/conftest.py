"""The speech models put together once per run (by the app's own code), and a transcriber on Whisper tiny.en."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.voice.speech_models import WHISPER_TINY_EN, ensure_speech_model
from app.voice.transcriber import Transcriber
from tests.helpers.speech import voice_or_skip


@pytest.fixture(scope="session")
def speech_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where this run's speech models are put together (each the first time a test needs it)."""
    return tmp_path_factory.mktemp("speech")


@pytest.fixture(scope="module")
def tiny_transcriber(speech_folder: Path) -> Iterator[Transcriber]:
    voice_or_skip()
    ensure_speech_model(WHISPER_TINY_EN, speech_folder)
    transcriber = Transcriber(WHISPER_TINY_EN, speech_folder)
    yield transcriber
    transcriber.close()

