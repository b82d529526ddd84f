"""What crosses the pipe to the transcription child and back: small frozen dataclasses, typed end to end."""

from __future__ import annotations

from dataclasses import dataclass

from app.voice.audio import AudioKind, AudioProblem

PROTOCOL_VERSION = 1


@dataclass(frozen=True)
class TranscribeAsk:
    """Transcribe this audio; language: an ISO 639-1 code, or None to detect it (a multilingual model)."""

    audio: bytes
    kind: AudioKind = AudioKind.FILE
    language: str | None = None
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class Segment:
    """A stretch of recognised speech, its times in seconds from the start of the audio, and what Whisper
    said of it (OpenAI's verbose_json carries the same: its tokens, mean log-probability, ...)."""

    start: float
    end: float
    text: str
    tokens: tuple[int, ...] = ()
    seek: int = 0
    temperature: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float = 0.0


@dataclass(frozen=True)
class Transcript:
    """What was said: the text, its segments, the language (detected or given) and how long the audio was."""

    text: str
    segments: tuple[Segment, ...]
    language: str
    language_probability: float
    duration: float
    model: str


@dataclass(frozen=True)
class ChildReady:
    """The child has loaded the model (model: its id) and waits for asks."""

    model: str
    multilingual: bool
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class Decoded:
    """The audio was read: how long it lasts, in seconds (the transcription's time limit follows it)."""

    seconds: float


@dataclass(frozen=True)
class Transcribed:
    transcript: Transcript


@dataclass(frozen=True)
class AudioRejected:
    """The audio was refused (a code plus facts, worded by each front end)."""

    problem: AudioProblem
    detail: str


@dataclass(frozen=True)
class ChildFailed:
    """The child could not load the model or transcribe: what went wrong, for the log and the words."""

    detail: str


ChildReply = ChildReady | Decoded | Transcribed | AudioRejected | ChildFailed
