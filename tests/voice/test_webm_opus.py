"""WebM with Opus read without PyAV, as the installed app reads it: the packets moved into Ogg for libsndfile. The
recording is the real one, written as WebM/Opus by PyAV's FFmpeg and libopus as browsers write it."""

from __future__ import annotations

import struct
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from app.voice.audio import AudioKind, AudioProblem, AudioRefused, decode
from app.voice.protocol import TranscribeAsk
from app.voice.transcriber import Transcriber
from app.voice.webm_opus import EBML_MAGIC, NotWebmOpus, _frames, packet_samples, webm_opus_to_ogg
from tests.helpers.speech import BECKETT, BECKETT_SAID, similarity, write_webm


@pytest.fixture(scope="module")
def webm(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    pytest.importorskip("av")
    path = tmp_path_factory.mktemp("webm") / "beckett.webm"
    write_webm(BECKETT, path)
    return path.read_bytes()


def without_pyav(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the installed app: PyAV is an empty stand-in (installer/runtime_hooks/speech_stand_ins.py)."""
    monkeypatch.setitem(sys.modules, "av", types.ModuleType("av"))


def refused(data: bytes) -> AudioRefused:
    with pytest.raises(AudioRefused) as caught:
        decode(data, AudioKind.FILE)
    return caught.value


def test_without_pyav_a_webm_reads_as_pyav_reads_it(webm: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    by_ffmpeg = decode(webm, AudioKind.FILE)
    without_pyav(monkeypatch)
    moved = decode(webm, AudioKind.FILE)
    assert moved.size == by_ffmpeg.size  # the pre-skip honoured: not a sample more or less
    assert np.corrcoef(moved, by_ffmpeg)[0, 1] > 0.999
    wav = decode(BECKETT.read_bytes(), AudioKind.FILE)
    assert abs(moved.size - wav.size) < 0.01 * wav.size


def test_the_moved_recording_is_heard(webm: bytes, monkeypatch: pytest.MonkeyPatch, speech_folder: Path) -> None:
    """Through the transcription child, which moves a WebM with Opus into Ogg before any other reader (PyAV too,
    where installed, is not asked), as the installed app does."""
    from tests.helpers.speech import voice_or_skip
    from app.voice.speech_models import WHISPER_TINY_EN, ensure_speech_model
    voice_or_skip()
    ensure_speech_model(WHISPER_TINY_EN, speech_folder)
    transcriber = Transcriber(WHISPER_TINY_EN, speech_folder)
    try:
        heard = transcriber.transcribe(TranscribeAsk(webm))
    finally:
        transcriber.close()
    assert similarity(heard.text, BECKETT_SAID) >= 0.8, heard.text


def test_another_codec_in_webm_needs_pyav_and_says_how_to_convert(webm: bytes,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    without_pyav(monkeypatch)
    vorbis = webm.replace(b"A_OPUS", b"A_VORB")  # the same length: only the codec's name differs
    with pytest.raises(NotWebmOpus) as named:
        webm_opus_to_ogg(vorbis)
    assert named.value.codec == "A_VORB"
    assert refused(vorbis).problem is AudioProblem.FORMAT_NOT_READ


@pytest.mark.parametrize("damage", ["header only", "cut in the middle", "noise after the magic", "a size of 2^56",
                                    "no blocks"])
def test_a_damaged_webm_is_refused_or_read_as_far_as_it_goes_quickly(webm: bytes, damage: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    without_pyav(monkeypatch)
    cluster = webm.index(b"\x1f\x43\xb6\x75")
    data = {"header only": webm[:40], "cut in the middle": webm[:len(webm) // 2],
            "noise after the magic": EBML_MAGIC + bytes(range(256)) * 40,
            # a Segment and a block that each claim 2^56 - 2 bytes: no allocation follows a claim
            "a size of 2^56": EBML_MAGIC + b"\x80" + b"\x18\x53\x80\x67" + b"\x01" + b"\xff" * 6 + b"\xfe" + b"\xa3"
            + b"\x01" + b"\xff" * 6 + b"\xfe" + bytes(100),
            "no blocks": webm[:cluster]}[damage]
    started = time.monotonic()
    if damage == "cut in the middle":
        samples = decode(data, AudioKind.FILE)
        assert 0.3 * 159_576 < samples.size < 0.7 * 159_576  # the first half, about
    else:
        assert refused(data).problem is AudioProblem.NOT_AUDIO
    assert time.monotonic() - started < 2


def test_packets_are_counted_by_their_toc_byte() -> None:
    assert packet_samples(bytes([31 << 3])) == 960  # CELT 20 ms, one frame: Chrome's usual
    assert packet_samples(bytes([(31 << 3) | 1])) == 1920  # two frames
    assert packet_samples(bytes([(16 << 3) | 3, 6])) == 6 * 120  # six 2.5 ms frames
    assert packet_samples(bytes([3 << 3])) == 2880  # SILK 60 ms
    assert packet_samples(bytes([13 << 3])) == 960  # hybrid 20 ms
    assert packet_samples(b"") == 0


def block(flags: int, laced: bytes) -> bytes:
    return struct.pack(">hB", 0, flags) + laced


def test_every_kind_of_lacing_splits_a_block_into_its_frames() -> None:
    one, two, three = b"a" * 300, b"b" * 5, b"c" * 7
    assert _frames(block(0x80, one)) == [one]
    assert _frames(block(0x82, bytes([2, 255, 45, 5]) + one + two + three)) == [one, two, three]  # Xiph: 255+45
    # EBML: 300 as a 2-byte number (0x412C), then 5 - 300 = -295 as a signed 2-byte difference (8191 - 295 + 0x4000)
    difference = (5 - 300) + 8191
    assert _frames(block(0x86, bytes([2, 0x41, 0x2C, 0x40 | difference >> 8, difference & 0xFF]) + one + two + three)) \
        == [one, two, three]
    assert _frames(block(0x84, bytes([2]) + b"x" * 9)) == [b"xxx"] * 3  # fixed: three equal parts
    with pytest.raises(NotWebmOpus, match="run past its end"):
        _frames(block(0x82, bytes([1, 200]) + b"short"))
