"""Images through a real engine process: Loaded says whether the model sees, refusals arrive
as Error events with their kind, and the engine keeps serving after each."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.engine.failures import BadImage, ErrorKind, ImageTrouble, NoVision
from app.engine.protocol import ChatMessage
from app.service.models.client import EngineClient
from app.service.models.engine_errors import EngineError
from tests.helpers.engine import answer
from tests.helpers.vision_gguf import IMAGE_TOKENS, IMAGE_WRAP, build_mmproj_gguf, build_vision_pair, png_bytes

SETTINGS = GenerationSettings(temperature=0.0, max_tokens=8, seed=1)
PNG = png_bytes()


def _run(scenario: object) -> None:
    asyncio.run(asyncio.wait_for(scenario, timeout=120))  # type: ignore[arg-type]


def test_an_engine_with_a_projector_answers_about_images_and_survives_bad_ones(tmp_path: Path) -> None:
    model, projector = build_vision_pair(tmp_path)

    async def scenario() -> None:
        client = EngineClient()
        try:
            loaded = await client.load(str(model), context_length=1024, threads=1, projector_path=str(projector))
            assert (loaded.vision, loaded.vision_problem) == (True, "")
            _, plain = await answer(client, [ChatMessage("user", "What is it?")], SETTINGS)
            text, pictured = await answer(client, [ChatMessage("user", "What is it?", images=(PNG,))], SETTINGS)
            assert text
            assert pictured.stats.prompt_tokens == plain.stats.prompt_tokens + IMAGE_TOKENS + len(IMAGE_WRAP) + 1
            counted = await client.count_prompt([ChatMessage("user", "What is it?", images=(PNG,))])
            assert counted == pictured.stats.prompt_tokens

            with pytest.raises(EngineError) as refused:
                await answer(client, [ChatMessage("user", "See", images=(PNG, b"\xff\xd8\xff" + b"x" * 99))],
                             SETTINGS)
            assert refused.value.kind == ErrorKind.BAD_IMAGE
            assert refused.value.failure == BadImage(ImageTrouble.NOT_AN_IMAGE, 0, 1)
            assert refused.value.message.startswith("Image 2 of message 1 could not be read")

            text, _ = await answer(client, [ChatMessage("user", "Still there?")], SETTINGS)
            assert text
        finally:
            await client.shutdown()

    _run(scenario())


def test_an_engine_without_vision_refuses_images_in_words(tmp_path: Path) -> None:
    model, _ = build_vision_pair(tmp_path)
    wide = build_mmproj_gguf(tmp_path / "mmproj-other.gguf", projection_dim=896)

    async def scenario() -> None:
        client = EngineClient()
        try:
            loaded = await client.load(str(model), context_length=512, threads=1)
            assert (loaded.vision, loaded.vision_problem) == (False, "")
            with pytest.raises(EngineError) as refused:
                await answer(client, [ChatMessage("user", "See", images=(PNG,))], SETTINGS)
            assert refused.value.kind == ErrorKind.NO_VISION
            assert refused.value.failure == NoVision("tiny-vision.gguf")
            with pytest.raises(EngineError) as counted:
                await client.count_prompt([ChatMessage("user", "See", images=(PNG,))])
            assert counted.value.kind == ErrorKind.NO_VISION

            loaded = await client.load(str(model), context_length=512, threads=1, projector_path=str(wide))
            assert loaded.vision is False
            assert "it was made for a model with 896-wide embeddings, not this one's 64" in loaded.vision_problem
            with pytest.raises(EngineError) as refused:
                await answer(client, [ChatMessage("user", "See", images=(PNG,))], SETTINGS)
            assert refused.value.failure == NoVision("tiny-vision.gguf", loaded.vision_problem)
            text, _ = await answer(client, [ChatMessage("user", "Text only then.")], SETTINGS)
            assert text
        finally:
            await client.shutdown()

    _run(scenario())
