"""Voice's settings: what dictation does with its words, when it stops, which microphone it opens, which
language it listens for; whether answers are read aloud as they are written, on which speaker, and how fast."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core.settings_group import group_from_dict
from app.core.speech_languages import WHISPER_LANGUAGES

# The voice's pace, as a factor of its own (1.0): slower than half is hard to follow, faster than twice
# hard to understand.
SLOWEST_SPEED = 0.5
FASTEST_SPEED = 2.0
# Dictation's language: "en" (the default: English, Whisper tiny.en, the fastest), DETECT (the multilingual
# model finds the language of each utterance) or an ISO 639-1 code Whisper knows (the multilingual model,
# told the language: better than detecting it for a short utterance).
DETECT_LANGUAGE = "detect"


@dataclass(frozen=True)
class VoiceSettings:
    """settings.json's `voice` group.

    send_at_once: dictated text is sent as soon as dictation ends (off: it waits in the message box to
    be read and edited). stop_at_end_of_speech: dictation ends by itself when the person stops talking
    (off: only a second press ends it). microphone: the input device's name, None for the system's default.
    read_aloud_answers: every answer is read aloud as it is written, sentence by sentence. speaker: the
    output device read-aloud plays on, None for the system's default. voice_speed: the voice's pace
    (SLOWEST_SPEED to FASTEST_SPEED; 1.0 its own). language: what dictation listens for, "en",
    DETECT_LANGUAGE or another language's ISO 639-1 code (app/core/speech_languages.py).
    interrupt_by_speaking: in voice mode the microphone stays open while Kestrel thinks and speaks, and the
    person's speech stops the answer and its voice (off: it opens again only once Kestrel has finished
    speaking; for speakers that the microphone hears, where Kestrel would interrupt itself).
    speech_model: the speech-to-text model dictation listens with (an id from Models → Speech), None to let the
    language choose (tiny.en for English, the multilingual base otherwise); one that cannot hear the language
    is passed over for that choice. voice: the voice answers are read with (an id), None for the default.
    """

    send_at_once: bool = False
    stop_at_end_of_speech: bool = True
    microphone: str | None = None
    read_aloud_answers: bool = False
    speaker: str | None = None
    voice_speed: float = 1.0
    language: str = "en"
    interrupt_by_speaking: bool = True
    speech_model: str | None = None
    voice: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validated(self) -> VoiceSettings:
        """These settings, or ValueError in plain words naming the bad one."""
        for name in ("send_at_once", "stop_at_end_of_speech", "read_aloud_answers", "interrupt_by_speaking"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"voice.{name} must be true or false (got {getattr(self, name)!r}).")
        for name in ("microphone", "speaker"):
            device = getattr(self, name)
            if device is not None and (not isinstance(device, str) or not device.strip()):
                raise ValueError(f"voice.{name} must be a device's name, or empty for the default (got {device!r}).")
        for name in ("speech_model", "voice"):
            chosen = getattr(self, name)
            if chosen is not None and (not isinstance(chosen, str) or not chosen.strip() or len(chosen) > 200):
                raise ValueError(f"voice.{name} must be an id from Models → Speech, or empty for the default "
                                 f"(got {chosen!r}).")
        language = self.language
        if not isinstance(language, str) or (language != DETECT_LANGUAGE and language not in WHISPER_LANGUAGES):
            raise ValueError(f"voice.language must be {DETECT_LANGUAGE!r} or a language code Whisper knows, such as "
                             f"en, de, fr or es (got {language!r}).")
        speed = self.voice_speed
        if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not SLOWEST_SPEED <= speed <= FASTEST_SPEED:
            raise ValueError(f"voice.voice_speed must be a number from {SLOWEST_SPEED} (half speed) to "
                             f"{FASTEST_SPEED} (twice as fast), 1.0 being the voice's own pace (got {speed!r}).")
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], problems: list[str]) -> VoiceSettings:
        """Every valid known value of data over the defaults; each bad one named in problems."""
        return group_from_dict(cls, data, problems, "voice")
