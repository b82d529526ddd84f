"""Voice mode's events, as the service hands them to front ends: codes and facts, worded by each front end."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Union

from app.service.voice.dictation_events import DictationFinished
from app.service.voice.read_aloud_events import ReadAloudFailed


class VoiceModeState(StrEnum):
    """Where voice mode is. LISTENING: the microphone is open for the person's next message; THINKING: their
    message was sent and the answer is being written (the voice has not started); SPEAKING: the answer is
    being said; WAITING: the window is hidden, the microphone closed until it is shown again."""

    OFF = "off"
    LISTENING = "listening"
    THINKING = "thinking"
    SPEAKING = "speaking"
    WAITING = "waiting"


class VoiceModeEnd(StrEnum):
    """Why voice mode ended. STOPPED: the person ended it; SILENCE: nobody spoke for SILENCE_LIMIT_S;
    MICROPHONE: the microphone could not be used or went (the DictationFinished says why); VOICE: the
    answer could not be said (the ReadAloudFailed says why); NOT_SENT: the chat did not take the message
    (detail: the words heard, kept for the person); NOT_ANSWERED: the message was sent but no answer came
    (the chat's own problem says why)."""

    STOPPED = "stopped"
    SILENCE = "silence"
    MICROPHONE = "microphone"
    VOICE = "voice"
    NOT_SENT = "not_sent"
    NOT_ANSWERED = "not_answered"


@dataclass(frozen=True)
class VoiceModeChanged:
    """Voice mode moved to state."""

    state: VoiceModeState


@dataclass(frozen=True)
class VoiceModeEnded:
    """Voice mode is off, for why; dictation or reading: the event that ended it, where one did; detail: the
    facts (NOT_SENT: the words that were heard)."""

    why: VoiceModeEnd
    dictation: DictationFinished | None = None
    reading: ReadAloudFailed | None = None
    detail: str = ""


VoiceModeEvent = Union[VoiceModeChanged, VoiceModeEnded]
