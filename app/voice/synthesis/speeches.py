"""Speech for asyncio callers (the API server): one synthesizer, a bounded queue, and idle unloading.

The synthesizer's child starts on the first ask and ends after idle_s without one, so a server that
spoke once does not hold a voice in memory for ever; close() ends it. One text is spoken at a time
(they share the same cores); asks beyond max_waiting are refused as busy instead of queued without end.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Generator
from pathlib import Path

from app.voice.synthesis.synthesizer import SpokenSentence, Synthesizer, SynthesizerLimits
from app.voice.synthesis.voices import SpeakingVoice

# Five minutes: long enough for a conversation's next turn, short enough not to hold 330 MB for nothing.
IDLE_S = 300.0
MAX_WAITING = 8


class SpeechBusy(Exception):
    """Too many texts are waiting to be spoken; try again in a moment."""


class Speeches:
    """The synthesizer behind the API, one text at a time."""

    def __init__(self, speech_folder: Path, limits: SynthesizerLimits = SynthesizerLimits(),
                 idle_s: float = IDLE_S, max_waiting: int = MAX_WAITING) -> None:
        self._synthesizer = Synthesizer(speech_folder, limits)
        self._idle_s = idle_s
        self._max_waiting = max_waiting
        self._turn = asyncio.Lock()
        self._waiting = 0
        self._idle: asyncio.TimerHandle | None = None

    @property
    def pid(self) -> int | None:
        return self._synthesizer.pid

    async def spoken(self, text: str, voice: SpeakingVoice, speed: float,
                     limit: int) -> AsyncGenerator[SpokenSentence, None]:
        """The text's sentences as they are made. TextRefused, SpeechBusy, SynthesisFailed or VoiceError
        come from the first step; a caller that stops early (a client gone) frees the synthesizer at once."""
        if self._waiting >= self._max_waiting:
            raise SpeechBusy()
        self._waiting += 1
        try:
            async with self._turn:
                self._cancel_idle()
                sentences = self._synthesizer.speak(text, voice, speed, limit=limit)
                try:
                    while (sentence := await asyncio.to_thread(_next, sentences)) is not None:
                        yield sentence
                finally:
                    await asyncio.to_thread(sentences.close)
                    self._idle = asyncio.get_running_loop().call_later(self._idle_s, self._unload_soon)
        finally:
            self._waiting -= 1

    async def release(self, voice_id: str) -> bool:
        """Let go of a voice about to be removed: the child ends if it holds that voice (the next ask starts one
        again). False while a text is spoken or waits: it may be with that voice."""
        if self._turn.locked() or self._waiting:
            return False
        async with self._turn:
            if self._synthesizer.voice == voice_id:
                await asyncio.to_thread(self._synthesizer.close)
        return True

    async def close(self) -> None:
        self._cancel_idle()
        async with self._turn:
            await asyncio.to_thread(self._synthesizer.close)

    def _cancel_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _unload_soon(self) -> None:
        self._idle = None
        asyncio.get_running_loop().create_task(self._unload_when_free())

    async def _unload_when_free(self) -> None:
        async with self._turn:
            if self._idle is None:  # no ask came meanwhile
                await asyncio.to_thread(self._synthesizer.close)


def _next(sentences: Generator[SpokenSentence, None, None]) -> SpokenSentence | None:
    return next(sentences, None)
