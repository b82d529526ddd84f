"""Read-aloud's events, as the service hands them to front ends: codes and facts, worded by each front end."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Union

from app.voice.devices import DeviceProblem
from app.voice.transcriber import FailureKind


class ReadAloudState(StrEnum):
    """Where read-aloud is. PREPARING: the voice is loading or the first sentence is being made;
    SPEAKING: sound is playing (or the next sentence comes between two)."""

    IDLE = "idle"
    PREPARING = "preparing"
    SPEAKING = "speaking"


class ReadAloudProblem(StrEnum):
    """Why an answer could not be read (to its end). VOICE_MISSING: the voice packages are not installed
    (detail: the voice's own words, which name the extra); VOICE_FAILED: the voice failed (failure, detail);
    DEVICE: the speaker could not be used or went away (device)."""

    VOICE_MISSING = "voice_missing"
    VOICE_FAILED = "voice_failed"
    DEVICE = "device"


@dataclass(frozen=True)
class ReadAloudStateChanged:
    """Read-aloud moved to state, for the answer message_id (None once idle)."""

    state: ReadAloudState
    message_id: int | None = None


@dataclass(frozen=True)
class ReadAloudFailed:
    """Reading message_id stopped for problem; device and failure say more where they apply, detail
    holds the facts (PortAudio's or the voice's own words), packages the ones missing (VOICE_MISSING)."""

    message_id: int
    problem: ReadAloudProblem
    device: DeviceProblem | None = None
    failure: FailureKind | None = None
    detail: str = ""
    packages: tuple[str, ...] = ()


ReadAloudEvent = Union[ReadAloudStateChanged, ReadAloudFailed]
