"""min_p reaches llama.cpp's sampler, and ONNX Runtime GenAI, which has none, refuses it in words."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Iterator

import pytest

from app.core.generation import GenerationSettings
from app.engine.backends import registry
from app.engine.backends.backend import DeviceChoice
from app.engine.backends.llama import BACKEND as LLAMA
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.backends.onnx import BACKEND as ONNX
from app.engine.capabilities import Capability
from app.engine.control import GenerationControl
from app.engine.failure_words import WINDOW, describe
from app.engine.failures import Unsupported
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done, Generate, Load
from app.service.models.client import EngineClient
from app.service.models.engine_errors import EngineError

TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"
SEEDS = (1, 2, 3, 4, 5)
# Hot and unrestricted: without min_p, the tiny model's random weights wander from the greedy path.
HOT = GenerationSettings(temperature=2.0, top_k=0, top_p=1.0, repeat_penalty=1.0, max_tokens=24)


@pytest.fixture(scope="module")
def backend(tiny_model: Path) -> Iterator[GgufBackend]:
    loaded = GgufBackend.load(Load(1, str(tiny_model), context_length=512, threads=1), DeviceChoice("CPU"))
    yield loaded
    loaded.close()


def _answer(backend: GgufBackend, settings: GenerationSettings) -> str:
    control = GenerationControl()
    control.begin(1)
    backend.reset()
    events = list(backend.generate(Generate(1, (ChatMessage("user", "Say something long."),), settings), control))
    assert isinstance(events[-1], Done)
    return "".join(event.text for event in events if isinstance(event, Delta))


def test_min_p_1_makes_a_hot_answer_the_greedy_one_for_every_seed(backend: GgufBackend) -> None:
    """min_p 1 keeps only the likeliest token, so temperature no longer matters. A backend that dropped
    min_p would sample from the whole vocabulary at temperature 2: the control shows it wanders."""
    greedy = _answer(backend, dataclasses.replace(HOT, temperature=0.0))
    sampled = [_answer(backend, dataclasses.replace(HOT, seed=seed)) for seed in SEEDS]
    kept = [_answer(backend, dataclasses.replace(HOT, seed=seed, min_p=1.0)) for seed in SEEDS]

    assert greedy.strip()
    assert all(text != greedy for text in sampled), "the control: without min_p each seed wanders"
    assert kept == [greedy] * len(SEEDS)


def test_onnx_runtime_genai_declares_no_min_p_and_the_refusal_says_what_to_do() -> None:
    assert LLAMA.can(Capability.MIN_P) and not ONNX.can(Capability.MIN_P)
    refused = registry.unsupported(ONNX, AnswerShape(), "phi-onnx", GenerationSettings(min_p=0.05))
    assert refused == Unsupported("phi-onnx", "ONNX Runtime GenAI", Capability.MIN_P,
                                  ("llama.cpp", "a server you added"))
    assert describe(refused, WINDOW) == ("phi-onnx runs on ONNX Runtime GenAI, which takes no min-p sampling. "
                                         "Set min-p to 0 (off), or choose a model that runs on llama.cpp or a "
                                         "server you added.")
    assert registry.unsupported(ONNX, AnswerShape(), "phi-onnx", GenerationSettings(min_p=0.0)) is None
    assert registry.unsupported(LLAMA, AnswerShape(), "tiny.gguf", GenerationSettings(min_p=0.05)) is None


def test_the_engine_process_refuses_min_p_for_an_onnx_model_and_answers_without_it() -> None:
    pytest.importorskip("onnxruntime_genai")

    async def scenario() -> tuple[EngineError, list[object]]:
        client = EngineClient()
        try:
            await client.load(str(TINY_ONNX), context_length=256)
            question = [ChatMessage("user", "Hi")]
            with pytest.raises(EngineError) as refused:
                async for _ in client.generate(question, GenerationSettings(min_p=0.1, max_tokens=4)):
                    pass
            answered = [event async for event in client.generate(question, GenerationSettings(max_tokens=4))]
            return refused.value, answered
        finally:
            await client.shutdown()

    refused, answered = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert refused.failure == Unsupported("tiny-onnx", "ONNX Runtime GenAI", Capability.MIN_P,
                                          ("llama.cpp", "a server you added"))
    assert "Set min-p to 0" in refused.message
    assert isinstance(answered[-1], Done), "min_p 0 (off) is what it always did"
