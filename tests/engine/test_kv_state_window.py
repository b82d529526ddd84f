"""Saved states of a sliding-window model (Gemma 3 270M, small_real_model): a repeated prompt restores one."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.engine.control import GenerationControl
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.protocol import ChatMessage, Delta, Done, Generate
from tests.engine.test_kv_state import _chat, _load

pytestmark = [pytest.mark.starter, pytest.mark.slow]


def _answer(backend: GgufBackend, messages: list[ChatMessage]) -> tuple[str, Done]:
    control = GenerationControl()
    control.begin(1)
    request = Generate(1, tuple(messages), GenerationSettings(temperature=0.0, max_tokens=12, seed=1))
    text, done = "", None
    for event in backend.generate(request, control):  # to its end: the state is saved after Done
        if isinstance(event, Delta):
            text += event.text
        else:
            done = event
    assert done is not None
    return text, done


def test_a_repeated_prompt_restores_the_state_and_answers_as_the_engine_that_went_on_in_memory(
        small_real_model: Path, tmp_path: Path) -> None:
    prompt = _chat("kestrels")
    plain = _load(small_real_model, None)
    try:
        _answer(plain, prompt)
        # The same prompt again in the same engine: llama.cpp's full-size window keeps
        # every cell in memory, so the cache is cut back to the prompt and reused.
        in_memory, _ = _answer(plain, prompt)
    finally:
        plain.close()
    folder = tmp_path / "states"
    first = _load(small_real_model, folder)
    _answer(first, prompt)
    first.close()
    reopened = _load(small_real_model, folder)
    try:
        restored, done = _answer(reopened, prompt)
        assert reopened.restored_from == "disk"
        assert done.stats is not None and done.stats.prompt_tokens_evaluated == 1
        assert restored == in_memory
    finally:
        reopened.close()
