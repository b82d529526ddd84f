"""gpt-oss's harmony answer through the real engine: a scripted tiny GGUF whose harmony
tokens are control tokens, as in gpt-oss's own GGUF, run by the vendored llama.cpp."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import llama_cpp
import pytest

from app.core.generation import GenerationSettings
from app.engine.backends.backend import DeviceChoice
from app.engine.control import GenerationControl
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done, Generate, Load
from tests.helpers.harmony_gguf import (ANSWER, ANSWER_SCRIPT, CALL_ARGUMENTS, CALL_NAME, THOUGHT,
                                        build_harmony_caller_gguf, build_harmony_gguf)

WEATHER = [{"type": "function", "function": {
    "name": CALL_NAME, "description": "The weather in a city today.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def _load(path: Path) -> GgufBackend:
    return GgufBackend.load(Load(request_id=1, model_path=str(path), context_length=512, threads=2),
                            DeviceChoice("CPU"))


@pytest.fixture(scope="module")
def harmony(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GgufBackend]:
    backend = _load(build_harmony_gguf(tmp_path_factory.mktemp("harmony") / "harmony.gguf"))
    yield backend
    backend.close()


def _answer(backend: GgufBackend, shape: AnswerShape = AnswerShape(), temperature: float = 0.0,
            ) -> tuple[list[Delta], Done]:
    settings = GenerationSettings(max_tokens=64, temperature=temperature, seed=3, top_k=0, top_p=1.0,
                                  repeat_penalty=1.0)
    request = Generate(2, (ChatMessage("user", "Say hello."),), settings, (), shape=shape)
    events = list(backend.generate(request, GenerationControl()))
    done = events[-1]
    assert isinstance(done, Done) and all(isinstance(event, Delta) for event in events[:-1])
    return [event for event in events[:-1] if isinstance(event, Delta)], done


def test_llama_cpp_treats_the_harmony_tokens_as_it_does_for_gpt_oss(harmony: GgufBackend) -> None:
    """The premise of the splitter: the headers print, and so does <|end|>, which no longer
    ends the answer (llama.cpp makes it user-defined when it takes it off the end tokens)."""
    vocab = harmony._vocab  # noqa: SLF001 - the loaded vocabulary is the fact under test
    tokens = {text: harmony._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)  # noqa: SLF001
              for text in ("<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>")}
    assert all(len(found) == 1 for found in tokens.values()), tokens
    ids = {text: found[0] for text, found in tokens.items()}
    printed = ("<|start|>", "<|channel|>", "<|message|>", "<|end|>")
    assert [harmony._piece(ids[text]) for text in printed] == [text.encode() for text in printed]  # noqa: SLF001
    eog = {text for text, token in ids.items() if llama_cpp.llama_vocab_is_eog(vocab, token)}
    assert eog == {"<|return|>", "<|call|>"}


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_the_analysis_channel_streams_as_thinking_and_only_the_final_text_as_answer(
        harmony: GgufBackend, temperature: float) -> None:
    deltas, done = _answer(harmony, temperature=temperature)
    thinking = "".join(d.text for d in deltas if d.thinking)
    answer = "".join(d.text for d in deltas if not d.thinking)
    assert (thinking, answer) == (THOUGHT, ANSWER)
    assert not any("<|" in d.text or "|>" in d.text for d in deltas)
    assert [d.thinking for d in deltas] == sorted((d.thinking for d in deltas), reverse=True)  # thinking first
    # It ended on <|return|>: every script token after the prompt's last one but that, and
    # not on <|end|> (the answer would have no final text) nor on the token after <|return|>.
    assert done.finish_reason == "stop" and done.stats.tokens == len(ANSWER_SCRIPT) - 2
    assert harmony.loaded.thinks and not harmony.loaded.thinking_switch
    assert done.stats.thinking_ms > 0


def test_a_call_on_the_commentary_channel_comes_out_as_a_tool_call(tmp_path: Path) -> None:
    backend = _load(build_harmony_caller_gguf(tmp_path / "caller.gguf"))
    try:
        deltas, done = _answer(backend, AnswerShape(tools=json.dumps(WEATHER)))
    finally:
        backend.close()
    calls = [d.tool_call for d in deltas if d.tool_call is not None]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [(CALL_NAME, json.loads(CALL_ARGUMENTS))]
    assert "".join(d.text for d in deltas if d.thinking) == THOUGHT
    assert "".join(d.text for d in deltas if not d.thinking) == ""
    assert done.finish_reason == "stop"
