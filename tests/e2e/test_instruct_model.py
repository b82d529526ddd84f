"""The starter model (Qwen2.5-Coder 1.5B Instruct) answers everyday questions, through its own chat template."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.engine.protocol import ChatMessage, Done
from app.service.models.client import EngineClient
from tests.helpers.engine import answer

pytestmark = pytest.mark.instruct
# Greedy and short: the same answer on every machine with this llama.cpp, in a few seconds.
GREEDY = GenerationSettings(temperature=0.0, max_tokens=24, seed=7, context_length=2048)


def test_the_starter_answers_a_question_and_a_follow_up_in_its_chat_template(starter_model: Path) -> None:
    async def scenario() -> tuple[str, str, str, Done]:
        client = EngineClient()
        try:
            loaded = await client.load(str(starter_model), context_length=2048)
            first = (ChatMessage("user", "What is the capital of France?"),)
            paris, _ = await answer(client, first, GREEDY)
            # The follow-up only makes sense with the first turn: the template carries it.
            second = first + (ChatMessage("assistant", paris), ChatMessage("user", "And of Italy?"))
            rome, done = await answer(client, second, GREEDY)
        finally:
            await client.shutdown()
        return loaded.chat_format, paris, rome, done

    chat_format, paris, rome, done = asyncio.run(scenario())
    assert chat_format == "embedded", "the GGUF's own (ChatML) template, not a built-in format"
    assert "Paris" in paris and "Rome" in rome, (paris, rome)
    assert done.finish_reason == "stop", "an instruct model ends its turn by itself"
    assert "<|im_start|>" not in paris + rome and "<|im_end|>" not in paris + rome
