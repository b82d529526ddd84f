"""The API's transcriptions owner: its child ends after the idle time, and asks past the queue's bound are refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.voice.protocol import TranscribeAsk
from app.voice.speech_models import WHISPER_TINY_EN
from app.voice.transcriptions import Transcriptions, TranscriptionsBusy
from tests.helpers.speech import BECKETT, BECKETT_SAID, similarity, voice_or_skip


def test_the_child_ends_once_idle(speech_folder: Path) -> None:
    voice_or_skip()

    async def scene() -> None:
        owner = Transcriptions(speech_folder, idle_s=0.5)
        try:
            transcript = await owner.transcribe(WHISPER_TINY_EN, TranscribeAsk(BECKETT.read_bytes()))
            assert similarity(transcript.text, BECKETT_SAID) >= 0.8
            assert owner.loaded() == (WHISPER_TINY_EN.id,)
            async with asyncio.timeout(30):
                while owner.loaded():
                    await asyncio.sleep(0.05)
        finally:
            await owner.close()

    asyncio.run(scene())


def test_a_remove_ends_that_models_child_unless_it_is_transcribing(speech_folder: Path) -> None:
    """Windows will not delete a model's file a process holds open: release() ends the model's child first."""
    voice_or_skip()

    async def scene() -> None:
        owner = Transcriptions(speech_folder)
        try:
            await owner.transcribe(WHISPER_TINY_EN, TranscribeAsk(BECKETT.read_bytes()))
            assert await owner.release("whisper-base") and owner.loaded() == (WHISPER_TINY_EN.id,)  # another's
            running = asyncio.create_task(owner.transcribe(WHISPER_TINY_EN, TranscribeAsk(BECKETT.read_bytes())))
            await asyncio.sleep(0)
            assert not await owner.release(WHISPER_TINY_EN.id)  # it is transcribing
            assert similarity((await running).text, BECKETT_SAID) >= 0.8
            assert await owner.release(WHISPER_TINY_EN.id) and owner.loaded() == ()
            again = await owner.transcribe(WHISPER_TINY_EN, TranscribeAsk(BECKETT.read_bytes()))
            assert similarity(again.text, BECKETT_SAID) >= 0.8  # the next ask starts a child again
        finally:
            await owner.close()

    asyncio.run(scene())


def test_an_ask_past_the_queue_bound_is_refused_at_once(speech_folder: Path) -> None:
    async def scene() -> None:
        owner = Transcriptions(speech_folder, max_waiting=0)
        with pytest.raises(TranscriptionsBusy):
            await owner.transcribe(WHISPER_TINY_EN, TranscribeAsk(BECKETT.read_bytes()))
        assert owner.loaded() == ()
        await owner.close()

    asyncio.run(scene())
