"""EngineClient.count_tokens / count_prompt against a real engine process, and the scripted engine's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import llama_cpp
import pytest

from app.core.answer_stats import FinishReason
from app.core.generation import GenerationSettings
from app.engine.failures import NoModel
from app.engine.protocol import ChatMessage, Delta, Done
from app.service.models.client import EngineClient
from app.service.models.engine_errors import EngineError
from tests.helpers.scripted_engine import ScriptedEngine

TEXT = "Attached: report.pdf, p. 12 — ü 你好 🦅 <|im_end|>\n" * 20
CHAT = (ChatMessage("system", "Answer from the material."), ChatMessage("user", TEXT + "What does it say?"))
ENDLESS = GenerationSettings(max_tokens=1500, temperature=0.0, seed=1)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=120))


def _llama_count(model: Path, text: str) -> int:
    return len(llama_cpp.Llama(str(model), vocab_only=True, verbose=False).tokenize(
        text.encode(), add_bos=False, special=False))


def test_no_model_is_said_at_once_and_starts_no_engine() -> None:
    async def scenario() -> None:
        client = EngineClient()
        for ask in (client.count_tokens("hello"), client.count_prompt(CHAT)):
            with pytest.raises(EngineError) as refused:
                await asyncio.wait_for(ask, 1)
            assert refused.value.failure == NoModel() and "No model is loaded" in refused.value.message
        assert client.pid is None
    run(scenario())


def test_counts_are_the_models_and_come_beside_a_held_answer(tiny_model: Path) -> None:
    async def scenario() -> None:
        client = EngineClient()
        try:
            await client.load(str(tiny_model), context_length=4096, threads=1)
            assert await client.count_tokens(TEXT) == _llama_count(tiny_model, TEXT)
            stream = client.generate(CHAT, ENDLESS)
            first = await anext(stream)
            assert isinstance(first, Delta)
            client.pause()  # the answer now holds the engine's request loop
            counted = await asyncio.wait_for(client.count_tokens(TEXT), 10)
            prompt = await asyncio.wait_for(client.count_prompt(CHAT), 10)
            client.resume()
            async for event in stream:
                last = event
            # The answer went on to its limit (the context's, this long prompt on a 2,048-token model).
            assert isinstance(last, Done) and last.finish_reason in {FinishReason.LENGTH, FinishReason.CONTEXT}
            assert counted == _llama_count(tiny_model, TEXT)
            assert prompt == last.stats.prompt_tokens
            await client.unload()
            with pytest.raises(EngineError) as refused:
                await client.count_tokens(TEXT)
            assert refused.value.failure == NoModel()
        finally:
            await client.shutdown()
    run(scenario())


def test_a_count_during_a_load_counts_with_the_model_being_loaded(tiny_model: Path, small_real_model: Path) -> None:
    async def scenario() -> None:
        client = EngineClient()
        try:
            await client.load(str(tiny_model), context_length=512, threads=1)
            loading = asyncio.create_task(client.load(str(small_real_model), context_length=1024, threads=1))
            await asyncio.sleep(0)  # the Load is on its way
            counted = await client.count_tokens(TEXT)
            await loading
            assert counted == _llama_count(small_real_model, TEXT) != _llama_count(tiny_model, TEXT)
        finally:
            await client.shutdown()
    run(scenario())


def test_the_scripted_engine_counts_as_its_answers_count(tiny_model: Path) -> None:
    async def scenario() -> None:
        engine = ScriptedEngine()
        with pytest.raises(EngineError) as refused:
            await engine.count_tokens("hello")
        assert refused.value.failure == NoModel()
        await engine.load(str(tiny_model))
        assert await engine.count_tokens("one two three") == 3
        prompt = await engine.count_prompt(CHAT)
        async for event in engine.generate(CHAT, GenerationSettings(max_tokens=3)):
            last = event
        assert isinstance(last, Done) and prompt == last.stats.prompt_tokens
        await engine.shutdown()
    run(scenario())
