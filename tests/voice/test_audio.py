"""Audio in: WAV read defensively (a lying header, odd formats, rates), raw PCM, and what is refused with which problem."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from app.voice.audio import MAX_SECONDS, AudioKind, AudioProblem, AudioRefused, decode
from app.voice.words import audio_refused_words
from app.voice.protocol import Segment, Transcript
from app.voice.transcript_formats import TranscriptFormat, written
from tests.helpers.speech import BECKETT, fmt_chunk, riff, wav_bytes, write_as


def tone(seconds: float, rate: int) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def refused(data: bytes, kind: AudioKind = AudioKind.FILE) -> AudioRefused:
    with pytest.raises(AudioRefused) as caught:
        decode(data, kind)
    return caught.value


def test_a_16_bit_wav_reads_as_its_samples() -> None:
    samples = (tone(1.0, 16_000) * 32767).astype("<i2")
    got = decode(wav_bytes(samples.tobytes()), AudioKind.FILE)
    assert got.dtype == np.float32 and got.size == 16_000
    assert np.allclose(got, samples / 32768.0, atol=1e-6)


def test_the_real_recording_reads_as_ten_seconds() -> None:
    assert decode(BECKETT.read_bytes(), AudioKind.FILE).size == 159_414


def test_stereo_at_44_1_khz_becomes_16_khz_mono_of_the_same_length_in_time() -> None:
    left = (tone(2.0, 44_100) * 32767).astype("<i2")
    stereo = np.stack([left, left], axis=1).reshape(-1)
    got = decode(wav_bytes(stereo.tobytes(), rate=44_100, channels=2), AudioKind.FILE)
    assert got.size == 32_000
    # Still a 440 Hz tone: its strongest frequency after resampling.
    assert abs(np.argmax(np.abs(np.fft.rfft(got))) * 16_000 / got.size - 440) < 2


@pytest.mark.parametrize("bits,tag,kind", [(8, 1, "u1"), (32, 1, "<i4"), (32, 3, "<f4")])
def test_other_sample_formats_read_alike(bits: int, tag: int, kind: str) -> None:
    wave = tone(0.5, 16_000)
    scaled = {"u1": (wave * 127 + 128), "<i4": wave * (2 ** 31 - 1), "<f4": wave}[kind].astype(kind)
    got = decode(riff(fmt_chunk(tag, 1, 16_000, bits), scaled.tobytes()), AudioKind.FILE)
    assert np.allclose(got, wave, atol=0.02)  # 8 bits: steps of 1/128


def test_a_header_that_claims_ten_hours_reads_as_the_bytes_there_are() -> None:
    samples = (tone(1.0, 16_000) * 32767).astype("<i2").tobytes()
    lying = riff(fmt_chunk(1, 1, 16_000, 16), samples, data_size=10 * 3600 * 16_000 * 2)
    assert decode(lying, AudioKind.FILE).size == 16_000


def test_raw_pcm_is_16_bit_16_khz_mono() -> None:
    samples = (tone(0.5, 16_000) * 32767).astype("<i2")
    assert np.allclose(decode(samples.tobytes() + b"\x01", AudioKind.PCM16), samples / 32768.0)


def test_what_is_refused_and_why() -> None:
    assert refused(b"").problem is AudioProblem.EMPTY
    assert refused(wav_bytes(b"\x00\x00" * 100)).problem is AudioProblem.TOO_SHORT
    assert refused(b"RIFF\x10\x00\x00\x00WAVEjunkjunk").problem is AudioProblem.NOT_AUDIO
    assert refused(riff(fmt_chunk(2, 1, 16_000, 4), b"\x00" * 8000)).problem is AudioProblem.UNSUPPORTED_WAV
    assert refused(riff(fmt_chunk(1, 1, 16_000, 16)[:10], b"\x00" * 8000)).problem is AudioProblem.NOT_AUDIO
    assert refused(riff(fmt_chunk(1, 0, 16_000, 16), b"\x00" * 8000)).problem is AudioProblem.UNSUPPORTED_WAV
    # Text named .wav: no RIFF header, so it goes to the general decoder, which finds no audio in it.
    assert refused(b"name,age\nada,36\n" * 200).problem is AudioProblem.NOT_AUDIO


def test_audio_past_the_limit_is_refused_before_it_is_transcribed() -> None:
    rate = 1000  # the lowest rate read: the longest audio in the fewest bytes
    silence = b"\x80" * (MAX_SECONDS * rate + rate)
    problem = refused(riff(fmt_chunk(1, 1, rate, 8), silence))
    assert problem.problem is AudioProblem.TOO_LONG and problem.detail == str(MAX_SECONDS + 1)


def test_subtitles_number_their_cues_and_count_hours() -> None:
    transcript = Transcript("Hello there. --> Bye.", (Segment(0.0, 1.5, "Hello there."), Segment(3661.25, 3662.0,
                                                                                              "--> Bye.")),
                            "en", 1.0, 3662.0, "whisper-tiny.en")
    assert written(transcript, TranscriptFormat.SRT) == ("1\n00:00:00,000 --> 00:00:01,500\nHello there.\n\n"
                                                         "2\n01:01:01,250 --> 01:01:02,000\n-> Bye.\n")
    assert written(transcript, TranscriptFormat.VTT).startswith("WEBVTT\n\n00:00:00.000 --> 00:00:01.500\n")
    assert written(transcript, TranscriptFormat.TEXT) == "Hello there. --> Bye.\n"


HOOK = Path(__file__).resolve().parents[2] / "installer" / "runtime_hooks" / "speech_stand_ins.py"


M4A = b"\x00\x00\x00\x20ftypM4A \x00\x00\x02\x00M4A isomiso2" + bytes(4000)  # an MP4 container's opening


def test_without_pyav_mp3_flac_and_ogg_are_read_and_other_files_refused_with_how_to_convert_them(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The frozen app carries no PyAV: its runtime hook puts an empty module in its place (run here as the app runs
    it, with the packages out of reach). MP3, FLAC and Ogg are still read (libsndfile), anything else is refused
    with words that say how to convert it."""
    done = subprocess.run([sys.executable, "-S", "-c", f"exec(open({str(HOOK)!r}).read()); import sys; "
                           "print(sorted(name for name in ('av', 'huggingface_hub') if not hasattr(sys.modules[name], "
                           "'__file__')))"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.split() == ["['av',", "'huggingface_hub']"], done
    monkeypatch.setitem(sys.modules, "av", types.ModuleType("av"))
    wav = decode(BECKETT.read_bytes(), AudioKind.FILE)
    assert wav.size == 159_414  # WAV is read as ever
    for format, suffix in (("MP3", "mp3"), ("FLAC", "flac"), ("OGG", "ogg")):
        path = tmp_path / f"beckett.{suffix}"
        write_as(BECKETT, path, format)
        samples = decode(path.read_bytes(), AudioKind.FILE)
        assert abs(samples.size - wav.size) < 0.05 * wav.size, (format, samples.size)  # MP3 adds its padding
        assert 0.5 < float(np.sqrt(np.mean(samples ** 2)) / np.sqrt(np.mean(wav ** 2))) < 2.0, format
    problem = refused(M4A)
    assert problem.problem is AudioProblem.FORMAT_NOT_READ
    words = audio_refused_words(problem)
    assert "WAV, MP3, FLAC, Ogg and WebM (Opus)" in words and "ffmpeg -i recording.m4a recording.wav" in words


def test_a_broken_mp3_or_flac_is_refused_or_read_as_far_as_it_goes(tmp_path: Path) -> None:
    """Cut in half, the file's first half is read; its first 100 bytes, or noise named .flac, are no audio."""
    wav = decode(BECKETT.read_bytes(), AudioKind.FILE)
    for format, suffix in (("MP3", "mp3"), ("FLAC", "flac")):
        path = tmp_path / f"beckett.{suffix}"
        write_as(BECKETT, path, format)
        whole = path.read_bytes()
        half = decode(whole[:len(whole) // 2], AudioKind.FILE)
        assert 0.3 * wav.size < half.size < 0.7 * wav.size, (format, half.size)
        with pytest.raises(AudioRefused):
            decode(whole[:100], AudioKind.FILE)
    noise = np.random.default_rng(5).integers(0, 256, 50_000, dtype=np.uint8).tobytes()
    with pytest.raises(AudioRefused) as noisy:
        decode(b"fLaC" + noise, AudioKind.FILE)
    assert noisy.value.problem in (AudioProblem.NOT_AUDIO, AudioProblem.FORMAT_NOT_READ, AudioProblem.TOO_SHORT)


def test_where_pyav_is_installed_the_hook_leaves_it_alone() -> None:
    av = pytest.importorskip("av")
    done = subprocess.run([sys.executable, "-c", f"exec(open({str(HOOK)!r}).read()); import sys, av; "
                           "print(hasattr(sys.modules['av'], 'open'))"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "True", done
    assert hasattr(av, "open")
