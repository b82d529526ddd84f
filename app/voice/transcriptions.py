"""Transcriptions for asyncio callers (the API server): a transcriber per speech model, a bounded queue, and idle unloading.

Each transcriber's child starts on its first ask and ends after idle_s without one, so a server that
transcribed once does not hold a model in memory for ever; close() ends them all.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.voice.protocol import TranscribeAsk, Transcript
from app.voice.speech_models import SpeechModel
from app.voice.transcriber import Transcriber, TranscriberLimits

# Five minutes: long enough for a conversation's next turn, short enough not to hold 300 MB for nothing.
IDLE_S = 300.0
# Asks beyond this many waiting are refused (busy) instead of queued without end.
MAX_WAITING = 8


class TranscriptionsBusy(Exception):
    """Too many transcriptions are waiting; try again in a moment."""


class Transcriptions:
    """The transcribers behind the API, one ask at a time across them (they share the same cores)."""

    def __init__(self, speech_folder: Path, limits: TranscriberLimits = TranscriberLimits(),
                 idle_s: float = IDLE_S, max_waiting: int = MAX_WAITING) -> None:
        self._speech_folder = speech_folder
        self._limits = limits
        self._idle_s = idle_s
        self._max_waiting = max_waiting
        self._transcribers: dict[str, Transcriber] = {}
        self._turn = asyncio.Lock()
        self._waiting = 0
        self._idle: asyncio.TimerHandle | None = None

    def loaded(self) -> tuple[str, ...]:
        """The ids of the speech models whose child runs now."""
        return tuple(model_id for model_id, transcriber in self._transcribers.items() if transcriber.pid is not None)

    async def transcribe(self, model: SpeechModel, ask: TranscribeAsk) -> Transcript:
        """The transcript; AudioRefused, TranscriptionFailed, SpeechModelError or TranscriptionsBusy otherwise."""
        if self._waiting >= self._max_waiting:
            raise TranscriptionsBusy()
        self._waiting += 1
        try:
            async with self._turn:
                self._cancel_idle()
                transcriber = self._transcribers.get(model.id)
                if transcriber is None:
                    transcriber = self._transcribers[model.id] = Transcriber(model, self._speech_folder, self._limits)
                try:
                    return await asyncio.to_thread(transcriber.transcribe, ask)
                finally:
                    self._idle = asyncio.get_running_loop().call_later(self._idle_s, self._unload_soon)
        finally:
            self._waiting -= 1

    async def release(self, model_id: str) -> bool:
        """Let go of a speech model about to be removed: its child ends (Windows will not delete a file a process
        holds open; the next ask starts one again). False while a transcription runs or waits: it may be with it."""
        if self._turn.locked() or self._waiting:
            return False
        async with self._turn:
            transcriber = self._transcribers.pop(model_id, None)
            if transcriber is not None:
                await asyncio.to_thread(transcriber.close)
        return True

    async def close(self) -> None:
        self._cancel_idle()
        async with self._turn:
            await self._unload()

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
                await self._unload()

    async def _unload(self) -> None:
        transcribers, self._transcribers = list(self._transcribers.values()), {}
        for transcriber in transcribers:
            await asyncio.to_thread(transcriber.close)
