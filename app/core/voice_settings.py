"""Voice's settings: what dictation does with its words, when it stops, and which microphone it opens."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from app.core.settings_group import group_from_dict


@dataclass(frozen=True)
class VoiceSettings:
    """settings.json's `voice` group.

    send_at_once: dictated text is sent as soon as dictation ends (off: it waits in the message box to
    be read and edited). stop_at_end_of_speech: dictation ends by itself when the person stops talking
    (off: only a second press ends it). microphone: the input device's name, None for the system's default.
    """

    send_at_once: bool = False
    stop_at_end_of_speech: bool = True
    microphone: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validated(self) -> VoiceSettings:
        """These settings, or ValueError in plain words naming the bad one."""
        for name in ("send_at_once", "stop_at_end_of_speech"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"voice.{name} must be true or false (got {getattr(self, name)!r}).")
        microphone = self.microphone
        if microphone is not None and (not isinstance(microphone, str) or not microphone.strip()):
            raise ValueError(f"voice.microphone must be a device's name, or empty for the default (got {microphone!r}).")
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], problems: list[str]) -> VoiceSettings:
        """Every valid known value of data over the defaults; each bad one named in problems."""
        return group_from_dict(cls, data, problems, "voice")
