"""ReadAloudDoor: the window's read-aloud (each answer's speaker, its menu item and shortcut, Escape)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from app.service.voice.read_aloud_events import ReadAloudState
from app.voice.devices import DeviceUnavailable, list_audio_devices

if TYPE_CHECKING:
    from app.service.root import Service


class ReadAloudDoor:
    """What an answer's speaker calls: `toggle(message id, text)` (read it, or stop it while it is read),
    `read`, `stop`, `subscribe` (read-aloud's events, on the loop: app/service/voice/read_aloud_events.py)
    and `speakers` (the output devices' names, for Settings → Voice, read on a thread); `state` and
    `message_id` (the answer read now) are read as they are now.

    The calls are ReadAloud's own (app/service/voice/read_aloud.py), handed over as they are. Made, it has
    read-aloud hear the chats' answers: the window's answers stream aloud when the setting says so.
    """

    def __init__(self, service: Service) -> None:
        reader = self._reader = service.read_aloud
        reader.listen_to_answers(service.subscribe)
        self.toggle = reader.toggle
        self.read = reader.read
        self.stop = reader.stop
        self.subscribe = reader.subscribe

    @property
    def state(self) -> ReadAloudState:
        return self._reader.state

    @property
    def message_id(self) -> int | None:
        return self._reader.message_id

    async def speakers(self) -> tuple[str, ...]:
        """The names of the speakers the sound system offers now (read on a thread; none when it has no
        sound library)."""
        try:
            devices = await asyncio.to_thread(list_audio_devices)
        except DeviceUnavailable:
            return ()
        return tuple(dict.fromkeys(device.name for device in devices.outputs))
