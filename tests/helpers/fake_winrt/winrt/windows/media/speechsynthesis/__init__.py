"""PyWinRT's winrt.windows.media.speechsynthesis, answering from the test's configuration (winrt/_fake.py)."""

from __future__ import annotations

import enum
import io
import struct
from dataclasses import dataclass

import numpy as np

from winrt import _fake
from winrt._fake import Operation

# 60 ms a character at rate 1.0, and a tone's frequency: enough to tell the utterances' lengths and rates apart.
SECONDS_PER_CHAR = 0.06
_TONE_HZ = 440.0


class VoiceGender(enum.IntEnum):
    MALE = 0
    FEMALE = 1


class SpeechAppendedSilence(enum.IntEnum):
    DEFAULT = 0
    MIN = 1


@dataclass(frozen=True)
class VoiceInformation:
    display_name: str
    id: str
    language: str
    description: str
    gender: VoiceGender


def _voices() -> list[VoiceInformation]:
    return [VoiceInformation(v["display_name"], v["id"], v["language"], v["description"],
                             VoiceGender[v["gender"].upper()]) for v in _fake.config()["voices"]]


class SpeechSynthesizerOptions:
    def __init__(self) -> None:
        self.speaking_rate = 1.0
        self.audio_volume = 1.0
        self.audio_pitch = 1.0
        self.appended_silence = SpeechAppendedSilence.DEFAULT

    def __setattr__(self, name: str, value: object) -> None:
        # "old_windows": before 1709/1803 these options' interfaces are missing (PyWinRT says so on use).
        if _fake.config().get("old_windows") and name in ("speaking_rate", "appended_silence") and hasattr(self, name):
            raise AttributeError(f"{name} is not available in this version of Windows")
        super().__setattr__(name, value)


class SpeechSynthesisStream:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)
        self.content_type = "audio/wav"
        self.closed = False

    def get_input_stream_at(self, position: int) -> io.BytesIO:
        return io.BytesIO(self.data[position:])

    def close(self) -> None:
        self.closed = True


class _Statics(type):
    """Static members live on the metaclass in PyWinRT: SpeechSynthesizer.all_voices, .default_voice."""

    @property
    def all_voices(cls) -> list[VoiceInformation]:
        return _voices()

    @property
    def default_voice(cls) -> VoiceInformation:
        voices = _voices()
        wanted = _fake.config().get("default")
        return next((voice for voice in voices if voice.id == wanted), voices[0])


class SpeechSynthesizer(metaclass=_Statics):
    def __init__(self) -> None:
        _fake.fail("construct")
        self.voice = type(self).default_voice
        self.options = SpeechSynthesizerOptions()

    def close(self) -> None:
        pass

    def synthesize_text_to_stream_async(self, text: str) -> Operation:
        _fake.fail("speak")
        _fake.log({"voice": self.voice.id, "text": text, "rate": self.options.speaking_rate,
                   "appended_silence": int(self.options.appended_silence)})
        rate = int((_fake.config().get("rates") or {}).get(self.voice.id, 16_000))
        count = int(len(text) * SECONDS_PER_CHAR / self.options.speaking_rate * rate)
        tone = 8000 * np.sin(2 * np.pi * _TONE_HZ * np.arange(count) / rate)
        samples = tone.astype("<i2").tobytes()
        return Operation(SpeechSynthesisStream(_wav(samples, rate)))


def _wav(samples: bytes, rate: int) -> bytes:
    """RIFF/WAVE, PCM 16-bit mono, with an 18-byte fmt chunk (cbSize 0)."""
    fmt = struct.pack("<HHIIHHH", 1, 1, rate, rate * 2, 2, 16, 0)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(samples)) + samples
    return b"RIFF" + struct.pack("<I", len(body)) + body
