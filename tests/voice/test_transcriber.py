"""Transcription in its own child on the real Whisper models and a real recording: words, times, languages, limits."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from app.voice.audio import AudioKind, AudioProblem, AudioRefused, decode
from app.voice.protocol import TranscribeAsk
from app.voice.speech_models import WHISPER_BASE, WHISPER_TINY_EN
from app.voice.transcriber import FailureKind, Transcriber, TranscriberLimits, TranscriptionFailed
from tests.helpers.speech import BECKETT, BECKETT_SAID, similarity, voice_or_skip


def test_the_recording_is_heard_with_its_words_and_times(tiny_transcriber: Transcriber) -> None:
    transcript = tiny_transcriber.transcribe(TranscribeAsk(BECKETT.read_bytes()))
    assert similarity(transcript.text, BECKETT_SAID) >= 0.8, transcript.text
    assert transcript.language == "en" and transcript.model == WHISPER_TINY_EN.id
    assert transcript.duration == pytest.approx(9.963, abs=0.01)
    starts = [segment.start for segment in transcript.segments]
    # One segment or several: Whisper's split of these 10 s differs between hosts (two segments on earlier
    # machines, one on an AVX2-only AMD EPYC on 2026-12-07; CTranslate2's int8 kernels are chosen by the CPU's
    # instruction sets, the likely cause, not proven). Whatever the split, the segments span the speech.
    assert starts == sorted(starts) and starts and transcript.segments[-1].end >= 0.7 * transcript.duration
    assert all(0 <= segment.start < segment.end <= transcript.duration + 0.5 for segment in transcript.segments)
    assert " ".join(segment.text for segment in transcript.segments) == transcript.text
    assert all(segment.tokens for segment in transcript.segments)


def test_raw_pcm_frames_are_heard_as_the_file_is(tiny_transcriber: Transcriber) -> None:
    pcm = (decode(BECKETT.read_bytes(), AudioKind.FILE) * 32767).astype("<i2").tobytes()
    transcript = tiny_transcriber.transcribe(TranscribeAsk(pcm, AudioKind.PCM16))
    assert similarity(transcript.text, BECKETT_SAID) >= 0.8, transcript.text


def test_bad_audio_is_refused_and_the_child_goes_on(tiny_transcriber: Transcriber) -> None:
    tiny_transcriber.transcribe(TranscribeAsk(BECKETT.read_bytes()))
    pid = tiny_transcriber.pid
    for data, problem in ((b"", AudioProblem.EMPTY), (b"not audio at all " * 100, AudioProblem.NOT_AUDIO)):
        with pytest.raises(AudioRefused) as refused:
            tiny_transcriber.transcribe(TranscribeAsk(data))
        assert refused.value.problem is problem
    assert tiny_transcriber.pid == pid


def test_a_child_killed_meanwhile_is_replaced_on_the_next_ask(tiny_transcriber: Transcriber) -> None:
    tiny_transcriber.transcribe(TranscribeAsk(BECKETT.read_bytes()))
    pid = tiny_transcriber.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    transcript = tiny_transcriber.transcribe(TranscribeAsk(BECKETT.read_bytes()))
    assert similarity(transcript.text, BECKETT_SAID) >= 0.8
    assert tiny_transcriber.pid not in (None, pid)


def test_a_transcription_past_its_time_is_stopped_and_its_child_killed(speech_folder: Path) -> None:
    voice_or_skip()
    transcriber = Transcriber(WHISPER_TINY_EN, speech_folder, TranscriberLimits(base_s=0.05, per_audio_s=0.0))
    try:
        with pytest.raises(TranscriptionFailed) as failed:
            transcriber.transcribe(TranscribeAsk(BECKETT.read_bytes()))
        assert failed.value.kind is FailureKind.TIMED_OUT
        assert transcriber.pid is None
    finally:
        transcriber.close()


def test_the_memory_cap_holds_the_child(speech_folder: Path) -> None:
    """200 MB of address space cannot hold the runtime and the model: the load fails, in words, not the caller."""
    voice_or_skip()
    transcriber = Transcriber(WHISPER_TINY_EN, speech_folder, TranscriberLimits(memory_bytes=200 * 1024 ** 2))
    try:
        with pytest.raises(TranscriptionFailed) as failed:
            transcriber.transcribe(TranscribeAsk(BECKETT.read_bytes()))
        assert failed.value.kind is FailureKind.LOAD_FAILED
    finally:
        transcriber.close()


@pytest.mark.slow
def test_the_multilingual_model_detects_the_language(speech_folder: Path) -> None:
    voice_or_skip()
    transcriber = Transcriber(WHISPER_BASE, speech_folder)
    try:
        transcript = transcriber.transcribe(TranscribeAsk(BECKETT.read_bytes()))
    finally:
        transcriber.close()
    assert transcript.language == "en" and transcript.language_probability > 0.5
    assert similarity(transcript.text, BECKETT_SAID) >= 0.8, transcript.text
