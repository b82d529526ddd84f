"""VoiceModeDoor: the window's voice mode (its button beside the microphone, its shortcut, the state it shows)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.service.voice.voice_mode_events import VoiceModeState

if TYPE_CHECKING:
    from app.service.root import Service


class VoiceModeDoor:
    """What the voice-mode button calls: `toggle` (a press: start when off, else end), `start`, `stop` and
    `subscribe` (voice mode's events, on the loop: app/service/voice/voice_mode_events.py); `state` is read
    as it is now.

    The calls are VoiceMode's own (app/service/voice/voice_mode.py), handed over as they are. Its listening
    is seen through the dictation door's events (the listening bar), its speaking through read-aloud's.
    """

    def __init__(self, service: Service) -> None:
        voice_mode = self._voice_mode = service.voice_mode
        self.toggle = voice_mode.toggle
        self.start = voice_mode.start
        self.stop = voice_mode.stop
        self.subscribe = voice_mode.subscribe

    @property
    def state(self) -> VoiceModeState:
        return self._voice_mode.state
