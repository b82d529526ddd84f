"""Dictation's values and events, as the service hands them to front ends: codes and facts, worded by each front end."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Union

from app.voice.devices import DeviceProblem

if TYPE_CHECKING:  # numpy comes with the transcriber: not imported when the service starts
    from app.voice.transcriber import FailureKind


class DictationState(StrEnum):
    """Where dictation is. OPENING: the microphone and the detector are being started (off the loop);
    LISTENING: the microphone is open; FINISHING: it is closed and the last words are being transcribed."""

    IDLE = "idle"
    OPENING = "opening"
    LISTENING = "listening"
    FINISHING = "finishing"


class VoiceMissing(StrEnum):
    """What this installation lacks for dictation (the microphone's own problems are DeviceProblem)."""

    VOICE_PACKAGES = "voice_packages"
    SPEECH_MODEL = "speech_model"


@dataclass(frozen=True)
class DictationAvailability:
    """Whether dictation can start here: missing None when it can; detail: the facts (a package's name,
    the speech model's own words)."""

    missing: VoiceMissing | None = None
    detail: str = ""

    @property
    def ready(self) -> bool:
        return self.missing is None


@dataclass(frozen=True)
class DictationStateChanged:
    """Dictation moved to state; device: the microphone in use while it is open ("" otherwise)."""

    state: DictationState
    device: str = ""


@dataclass(frozen=True)
class DictationSpeechStarted:
    """The detector heard speech begin (a front end may say "Hearing you…")."""


@dataclass(frozen=True)
class DictationHeard:
    """The words recognised so far in this dictation (text), the newest utterance's being part."""

    text: str
    part: str


@dataclass(frozen=True)
class DictationNotHeard:
    """An utterance the transcriber could not turn into words; dictation goes on."""

    failure: FailureKind
    detail: str


@dataclass(frozen=True)
class DictationFinished:
    """Dictation is over (the microphone is closed): text holds every word heard. Why it ended, when not by
    a stop or the end of speech: problem (the microphone's), missing (this installation's), or a bug
    (error: its facts). send_at_once: the setting, read as it ended. voice_mode: voice mode listened (its
    words are voice mode's to send: app/service/voice/voice_mode.py), not the mic button."""

    text: str
    problem: DeviceProblem | None = None
    missing: VoiceMissing | None = None
    detail: str = ""
    error: str = ""
    send_at_once: bool = False
    voice_mode: bool = False

    @property
    def ended_well(self) -> bool:
        return self.problem is None and self.missing is None and not self.error


DictationEvent = Union[DictationStateChanged, DictationSpeechStarted, DictationHeard, DictationNotHeard,
                       DictationFinished]
