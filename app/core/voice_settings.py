"""Voice's settings: what dictation does with its words, when it stops, which microphone it opens; whether
answers are read aloud as they are written, on which speaker, and how fast."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core.settings_group import group_from_dict

# The voice's pace, as a factor of its own (1.0): slower than half is hard to follow, faster than twice
# hard to understand.
SLOWEST_SPEED = 0.5
FASTEST_SPEED = 2.0


@dataclass(frozen=True)
class VoiceSettings:
    """settings.json's `voice` group.

    send_at_once: dictated text is sent as soon as dictation ends (off: it waits in the message box to
    be read and edited). stop_at_end_of_speech: dictation ends by itself when the person stops talking
    (off: only a second press ends it). microphone: the input device's name, None for the system's default.
    read_aloud_answers: every answer is read aloud as it is written, sentence by sentence. speaker: the
    output device read-aloud plays on, None for the system's default. voice_speed: the voice's pace
    (SLOWEST_SPEED to FASTEST_SPEED; 1.0 its own).
    """

    send_at_once: bool = False
    stop_at_end_of_speech: bool = True
    microphone: str | None = None
    read_aloud_answers: bool = False
    speaker: str | None = None
    voice_speed: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validated(self) -> VoiceSettings:
        """These settings, or ValueError in plain words naming the bad one."""
        for name in ("send_at_once", "stop_at_end_of_speech", "read_aloud_answers"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"voice.{name} must be true or false (got {getattr(self, name)!r}).")
        for name in ("microphone", "speaker"):
            device = getattr(self, name)
            if device is not None and (not isinstance(device, str) or not device.strip()):
                raise ValueError(f"voice.{name} must be a device's name, or empty for the default (got {device!r}).")
        speed = self.voice_speed
        if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not SLOWEST_SPEED <= speed <= FASTEST_SPEED:
            raise ValueError(f"voice.voice_speed must be a number from {SLOWEST_SPEED} (half speed) to "
                             f"{FASTEST_SPEED} (twice as fast), 1.0 being the voice's own pace (got {speed!r}).")
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], problems: list[str]) -> VoiceSettings:
        """Every valid known value of data over the defaults; each bad one named in problems."""
        return group_from_dict(cls, data, problems, "voice")
