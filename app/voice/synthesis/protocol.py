"""What crosses the pipe to the synthesis child and back: small frozen dataclasses, typed end to end."""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOL_VERSION = 1


@dataclass(frozen=True)
class SpeakSentence:
    """Say one sentence (already written out for speaking) at speed (1.0: the voice's own pace)."""

    text: str
    speed: float = 1.0
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class VoiceReady:
    """The child has loaded the voice (its id) and says audio at sample_rate, 16-bit mono."""

    voice: str
    sample_rate: int
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class SentenceSpoken:
    """One sentence's audio: 16-bit little-endian mono PCM at the voice's rate."""

    pcm: bytes


@dataclass(frozen=True)
class SynthesisChildFailed:
    """The child could not load the voice or say a sentence: what went wrong, for the log and the words."""

    detail: str


@dataclass(frozen=True)
class VoiceUnavailable:
    """The child could not load a Windows voice, for a reason the person can act on: the words to tell them."""

    words: str


SynthesisReply = VoiceReady | SentenceSpoken | SynthesisChildFailed | VoiceUnavailable
