"""Audio in: WAV read defensively, raw 16-bit PCM, MP3/FLAC/Ogg through libsndfile, and other formats through
PyAV where it is installed, all to 16 kHz mono float32.

libsndfile (the soundfile package) is what the installed app carries; PyAV (which faster-whisper brings to a
pip install) is left out of it, its FFmpeg being GPL, so there M4A and the like are refused in words. WebM with
Opus (browsers' recordings) is read there too: its packets are moved into Ogg for libsndfile (webm_opus.py).

Runs in the transcription child (app/voice/transcriber_child.py), so a decoder that a hostile file
crashes or swells takes only that child with it; what a person can fix comes back as an AudioProblem.
"""

from __future__ import annotations

import importlib
import io
import struct
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where audio is decoded: the values here are read by the window at start
    import numpy as np
    import numpy.typing as npt

    Samples = npt.NDArray[np.float32]

SAMPLE_RATE = 16_000
# Longer than any dictation or voice note; a file past it is refused, not transcribed for hours.
MAX_SECONDS = 2 * 60 * 60
# Below this there is nothing to hear (a tenth of a second).
MIN_SAMPLES = SAMPLE_RATE // 10


class AudioKind(StrEnum):
    """What the bytes are: a file (WAV or another container) or raw PCM (16 kHz, mono, 16-bit little-endian)."""

    FILE = "file"
    PCM16 = "pcm16"


class AudioProblem(StrEnum):
    """Why audio was refused; each front end words it for its user (app/voice/words.py)."""

    EMPTY = "empty"
    TOO_SHORT = "too_short"
    TOO_LONG = "too_long"
    NOT_AUDIO = "not_audio"
    UNSUPPORTED_WAV = "unsupported_wav"
    FORMAT_NOT_READ = "format_not_read"  # not WAV, MP3, FLAC, Ogg or WebM/Opus, and no PyAV to read it (the frozen app)


class AudioRefused(Exception):
    """Audio that cannot be transcribed, with the facts that say why (detail: a number or a name)."""

    def __init__(self, problem: AudioProblem, detail: str = "") -> None:
        super().__init__(problem, detail)
        self.problem = problem
        self.detail = detail


def decode(data: bytes, kind: AudioKind) -> Samples:
    """The audio as 16 kHz mono float32 in [-1, 1], or AudioRefused."""
    if not data:
        raise AudioRefused(AudioProblem.EMPTY)
    if kind is AudioKind.PCM16:
        samples = _from_int16(data[: len(data) - len(data) % 2])
    elif data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        samples = _read_wav(data)
    else:
        samples = _decode_other(data)
    if samples.size < MIN_SAMPLES:
        raise AudioRefused(AudioProblem.TOO_SHORT, f"{samples.size / SAMPLE_RATE:.2f}")
    return samples


def _from_int16(data: bytes) -> Samples:
    import numpy as np
    return (np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0)


def _read_wav(data: bytes) -> Samples:
    frames, rate = wav_frames(data)
    return _resampled(frames, rate)


def wav_frames(data: bytes) -> tuple[Samples, int]:
    """A RIFF/WAVE file's samples, mono float32 in [-1, 1], and their rate; AudioRefused otherwise. Chunk sizes are
    trusted only as far as the bytes go, so a header that claims ten hours over ten seconds of data reads as ten
    seconds; any other chunks (LIST, fact) are passed over. Also reads what Windows' voices say
    (app/voice/synthesis/windows_voices.py)."""
    import numpy as np
    fmt, payload = _wav_chunks(data)
    if fmt is None or payload is None:
        raise AudioRefused(AudioProblem.NOT_AUDIO, "no fmt or data chunk")
    if len(fmt) < 16:
        raise AudioRefused(AudioProblem.NOT_AUDIO, "short fmt chunk")
    tag, channels, rate, _, block, bits = struct.unpack("<HHIIHH", fmt[:16])
    if tag == 0xFFFE and len(fmt) >= 26:  # WAVE_FORMAT_EXTENSIBLE: the real tag opens the sub-format GUID
        tag = struct.unpack("<H", fmt[24:26])[0]
    if not 1 <= channels <= 8 or not 1000 <= rate <= 384_000 or not block or block != channels * bits // 8:
        raise AudioRefused(AudioProblem.UNSUPPORTED_WAV, f"{channels} channels, {rate} Hz, {bits} bits")
    payload = payload[: len(payload) - len(payload) % block]
    if len(payload) // block > MAX_SECONDS * rate:
        raise AudioRefused(AudioProblem.TOO_LONG, f"{len(payload) // block / rate:.0f}")
    return _wav_samples(payload, tag, bits).reshape(-1, channels).mean(axis=1, dtype=np.float32), rate


def _wav_chunks(data: bytes) -> tuple[bytes | None, bytes | None]:
    fmt = payload = None
    at = 12
    while at + 8 <= len(data) and (fmt is None or payload is None):
        name, size = data[at:at + 4], struct.unpack("<I", data[at + 4:at + 8])[0]
        body = data[at + 8:at + 8 + size]
        if name == b"fmt ":
            fmt = body
        elif name == b"data":
            payload = body
        at += 8 + size + (size & 1)
    return fmt, payload


def _wav_samples(payload: bytes, tag: int, bits: int) -> Samples:
    import numpy as np
    if tag == 1 and bits == 16:
        return _from_int16(payload)
    if tag == 1 and bits == 8:
        return (np.frombuffer(payload, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    if tag == 1 and bits == 24:
        raw = np.frombuffer(payload, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        value = raw[:, 0] | (raw[:, 1] << 8) | (raw[:, 2] << 16)
        value = np.where(value >= 1 << 23, value - (1 << 24), value)
        return (value.astype(np.float32) / float(1 << 23))
    if tag == 1 and bits == 32:
        return (np.frombuffer(payload, dtype="<i4").astype(np.float32) / float(1 << 31))
    if tag == 3 and bits == 32:
        return np.clip(np.nan_to_num(np.frombuffer(payload, dtype="<f4")), -1.0, 1.0).astype(np.float32)
    raise AudioRefused(AudioProblem.UNSUPPORTED_WAV, f"format {tag}, {bits} bits")


def _resampled(samples: Samples, rate: int) -> Samples:
    """To 16 kHz by linear interpolation: enough for speech recognition, whose features stop at 8 kHz."""
    import numpy as np
    if rate == SAMPLE_RATE or samples.size == 0:
        return samples.astype(np.float32, copy=False)
    count = int(samples.size * SAMPLE_RATE / rate)
    positions = np.arange(count, dtype=np.float64) * (rate / SAMPLE_RATE)
    return np.interp(positions, np.arange(samples.size), samples).astype(np.float32)


def _decode_other(data: bytes) -> Samples:
    """MP3, FLAC, Ogg through libsndfile, and WebM with Opus moved into Ogg for it (webm_opus.py); what it does not
    know (M4A, WebM with Vorbis…) through PyAV where installed."""
    from app.voice.webm_opus import NotWebmOpus, is_webm, webm_opus_to_ogg
    try:
        soundfile = importlib.import_module("soundfile")
    except (ImportError, OSError):  # OSError: the package without its library
        soundfile = None
    if is_webm(data) and soundfile is not None:
        try:
            return _decode_sndfile(soundfile, webm_opus_to_ogg(data))
        except NotWebmOpus as not_opus:
            if not not_opus.codec and not _av_here():  # damaged, or no audio: no other reader would do better
                raise AudioRefused(AudioProblem.NOT_AUDIO, str(not_opus)) from not_opus
            return _decode_av(data)  # Vorbis in WebM, Matroska's other codecs: FFmpeg's, where installed
    if soundfile is not None:
        try:
            return _decode_sndfile(soundfile, data)
        except AudioRefused as refused:
            if refused.problem is not AudioProblem.NOT_AUDIO:
                raise
    return _decode_av(data)


# libsndfile's formats, by its major format names: what a refusal can say this Kestrel reads.
_SNDFILE_READS = ("MP3", "FLAC", "OGG")
_BLOCK_FRAMES = 1 << 16


def _decode_sndfile(soundfile: Any, data: bytes) -> Samples:
    """Block by block (memory bounded by the output, never the file's claims), each block to mono and 16 kHz."""
    import numpy as np

    from app.voice.resampling import StreamResampler
    try:
        opened = soundfile.SoundFile(io.BytesIO(data))
    except Exception as exc:  # LibsndfileError: not a format it reads
        raise AudioRefused(AudioProblem.NOT_AUDIO, type(exc).__name__) from exc
    chunks: list[Samples] = []
    total = 0
    with opened:
        rate = int(opened.samplerate)
        if not 1000 <= rate <= 384_000 or not 1 <= opened.channels <= 8:
            raise AudioRefused(AudioProblem.NOT_AUDIO, f"{opened.channels} channels, {rate} Hz")
        resampler = StreamResampler(rate, SAMPLE_RATE) if rate != SAMPLE_RATE else None
        try:  # read() until it runs dry, not blocks(): that one trusts the header's length (an MP3's LAME
            # header of a file cut short) and hands the last block's samples again to make it up
            while (block := opened.read(_BLOCK_FRAMES, dtype="int16", always_2d=True)).size:
                mono = block.mean(axis=1).round().astype(np.int16)
                if resampler is not None:
                    mono = resampler.convert(mono)
                total += mono.size
                if total > MAX_SECONDS * SAMPLE_RATE:
                    raise AudioRefused(AudioProblem.TOO_LONG, f"{total / SAMPLE_RATE:.0f}")
                chunks.append(mono.astype(np.float32) / 32768.0)
        except AudioRefused:
            raise
        except Exception as exc:  # a stream that breaks off or lies part-way
            if not chunks:
                raise AudioRefused(AudioProblem.NOT_AUDIO, type(exc).__name__) from exc
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)


def _av_here() -> bool:
    """Whether PyAV (with its FFmpeg) is installed: not in the installed app, whose build leaves a stand-in."""
    try:
        return hasattr(importlib.import_module("av"), "open")
    except ImportError:
        return False


def _decode_av(data: bytes) -> Samples:
    """M4A, WebM… through PyAV (FFmpeg), which faster-whisper brings to a pip install."""
    import numpy as np
    try:
        av = importlib.import_module("av")
    except ImportError as exc:
        raise AudioRefused(AudioProblem.FORMAT_NOT_READ, "PyAV is not installed") from exc
    if not hasattr(av, "open"):  # the frozen app's stand-in (build.spec: PyAV is left out, its FFmpeg is GPL)
        raise AudioRefused(AudioProblem.FORMAT_NOT_READ, "PyAV is not carried")
    chunks: list[Samples] = []
    total = 0
    try:
        with av.open(io.BytesIO(data), mode="r", metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise AudioRefused(AudioProblem.NOT_AUDIO, "no audio stream")
            resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
            for frame in container.decode(audio=0):
                for out in resampler.resample(frame):
                    chunk = out.to_ndarray().reshape(-1).astype(np.float32) / 32768.0
                    total += chunk.size
                    if total > MAX_SECONDS * SAMPLE_RATE:
                        raise AudioRefused(AudioProblem.TOO_LONG, f"{total / SAMPLE_RATE:.0f}")
                    chunks.append(chunk)
    except AudioRefused:
        raise
    except Exception as exc:  # PyAV's errors (InvalidDataError, …) for whatever is not audio
        raise AudioRefused(AudioProblem.NOT_AUDIO, type(exc).__name__) from exc
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
