"""Voice activity on the real Silero model: where speech starts and ends in a real recording, whatever the frame size."""

from __future__ import annotations

import numpy as np
import pytest

from app.voice.audio import AudioKind, decode
from app.voice.speech_models import SpeechModelError
from app.voice.vad import SpeechEnded, SpeechEvent, SpeechStarted, VoiceActivity, vad_model_path
from tests.helpers.speech import BECKETT, voice_or_skip

SECOND = 16_000


def padded_recording() -> np.ndarray:
    """One second of silence, the recording (9.96 s; its last word ends near 8.8 s), one second of silence."""
    speech = (decode(BECKETT.read_bytes(), AudioKind.FILE) * 32767).astype(np.int16)
    silence = np.zeros(SECOND, dtype=np.int16)
    return np.concatenate([silence, speech, silence])


def events_of(audio: np.ndarray, frame: int) -> list[SpeechEvent]:
    detector = VoiceActivity()
    events: list[SpeechEvent] = []
    for at in range(0, audio.size, frame):
        events += detector.feed(audio[at:at + frame])
    return events + detector.finish()


def test_speech_starts_after_the_silence_and_ends_before_it() -> None:
    voice_or_skip()
    events = events_of(padded_recording(), 480)  # 30 ms frames, as a microphone delivers them
    assert events and isinstance(events[0], SpeechStarted) and isinstance(events[-1], SpeechEnded)
    assert 1.0 <= events[0].at <= 1.8, events
    assert 9.3 <= events[-1].at <= 10.96, events  # before the trailing second of silence
    # Starts and ends alternate, each end after its start.
    assert all(isinstance(event, SpeechStarted if n % 2 == 0 else SpeechEnded) for n, event in enumerate(events))
    assert all(end.started < end.at for end in events if isinstance(end, SpeechEnded))


def test_the_frame_size_does_not_change_what_is_heard() -> None:
    voice_or_skip()
    audio = padded_recording()
    assert events_of(audio, 160) == events_of(audio, 4096) == events_of(audio, audio.size)


def test_silence_and_a_faint_hiss_are_not_speech() -> None:
    voice_or_skip()
    hiss = (np.random.default_rng(7).normal(0, 30, 3 * SECOND)).astype(np.int16)
    assert events_of(np.zeros(3 * SECOND, dtype=np.int16), 512) == []
    assert events_of(hiss, 512) == []


def test_float_frames_are_heard_as_int16_frames_are() -> None:
    voice_or_skip()
    audio = padded_recording()
    assert events_of(audio.astype(np.float32) / 32768.0, 512) == events_of(audio, 512)


def test_a_changed_model_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    voice_or_skip()
    vad_model_path()
    monkeypatch.setattr("app.voice.vad.VAD_SHA256", "0" * 64)
    with pytest.raises(SpeechModelError, match="checksum"):
        vad_model_path()
