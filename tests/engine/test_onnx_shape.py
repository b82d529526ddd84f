"""Answer shapes on real ONNX Runtime GenAI (the tiny model in tests/fixtures/tiny-onnx).

GenAI holds an answer to a JSON schema with its guidance (llguidance) but reads no
GBNF; a raw prompt is tokenized as it is. The tiny model never ends an answer by
itself, so an answer that stops did so because its schema was complete.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import jsonschema
import pytest

og = pytest.importorskip("onnxruntime_genai")

from app.core.generation import GenerationSettings  # noqa: E402
from app.engine.backends.backend import DeviceChoice  # noqa: E402
from app.engine.control import GenerationControl  # noqa: E402
from app.engine.errors import ShapeRefused  # noqa: E402
from app.engine.failure_words import WINDOW, describe  # noqa: E402
from app.engine.failures import BadShape, NoToolUse, ShapePart, Unsupported  # noqa: E402
from app.engine.backends.onnx import BACKEND as ONNX  # noqa: E402
from app.engine.backends.registry import unsupported  # noqa: E402
from app.engine.capabilities import Capability  # noqa: E402
from app.engine.backends.onnx.onnx_backend import OnnxBackend  # noqa: E402
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done, Generate, Load  # noqa: E402

TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"
HELLO = (ChatMessage("user", "Hello there"),)
SCHEMA = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 12},
    "people": {"type": "integer", "minimum": 0, "maximum": 999},
    "coastal": {"type": "boolean"}},
    "required": ["city", "people", "coastal"], "additionalProperties": False}
TOOLS = json.dumps([{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}])


@pytest.fixture(scope="module")
def backend() -> Iterator[OnnxBackend]:
    loaded = OnnxBackend.load(Load(request_id=1, model_path=str(TINY_ONNX)), DeviceChoice("CPU"))
    yield loaded
    loaded.close()


def _answer(backend: OnnxBackend, shape: AnswerShape, settings: GenerationSettings,
            messages: tuple[ChatMessage, ...] = HELLO) -> tuple[str, Done]:
    events = list(backend.generate(Generate(3, messages, settings, shape=shape), GenerationControl()))
    done = events[-1]
    assert isinstance(done, Done)
    return "".join(e.text for e in events[:-1] if isinstance(e, Delta)), done


def test_a_json_schema_holds_the_answer(backend: OnnxBackend) -> None:
    for settings in (GenerationSettings(max_tokens=120, temperature=0.0),
                     GenerationSettings(max_tokens=120, temperature=1.5, top_k=0, top_p=1.0, seed=4)):
        text, done = _answer(backend, AnswerShape(json_schema=json.dumps(SCHEMA)), settings)
        jsonschema.validate(json.loads(text), SCHEMA)
        assert done.finish_reason == "stop"
    # So it can fail: left alone, the tiny model writes no JSON and never stops.
    text, done = _answer(backend, AnswerShape(), GenerationSettings(max_tokens=20, temperature=0.0))
    assert done.finish_reason == "length" and not text.startswith("{")


def test_a_gbnf_grammar_never_reaches_it_and_one_json_object_is_followed(backend: OnnxBackend) -> None:
    # Registered without grammars, so the engine refuses one before this backend sees it
    # (tests/engine/test_backend_registry.py drives it through the engine process).
    refused = unsupported(ONNX, AnswerShape(grammar='root ::= "yes"'), "tiny-onnx")
    assert refused == Unsupported("tiny-onnx", "ONNX Runtime GenAI", Capability.GRAMMARS, ("llama.cpp",))
    assert "takes no grammars" in describe(refused, WINDOW)
    # response_format json_object, which the API once sent as llama.cpp's GBNF, is a schema of any object here.
    for temperature in (0.0, 1.0):
        text, done = _answer(backend, AnswerShape(json_object=True),
                             GenerationSettings(max_tokens=120, temperature=temperature, seed=3))
        assert isinstance(json.loads(text), dict) and done.finish_reason == "stop"


def test_a_schema_genai_cannot_follow_is_refused(backend: OnnxBackend) -> None:
    with pytest.raises(ShapeRefused) as refused:
        _answer(backend, AnswerShape(json_schema='{"type": "nonsense"}'), GenerationSettings(max_tokens=4))
    assert isinstance(refused.value.failure, BadShape) and refused.value.failure.part == ShapePart.JSON_SCHEMA


def test_a_raw_prompt_is_tokenized_as_it_is(backend: OnnxBackend) -> None:
    prompt = "Once upon a time <|im_start|> the falcon"
    text, done = _answer(backend, AnswerShape(prompt=prompt), GenerationSettings(max_tokens=10, temperature=0.0),
                         messages=())
    chat, chat_done = _answer(backend, AnswerShape(), GenerationSettings(max_tokens=10, temperature=0.0),
                              messages=(ChatMessage("user", prompt),))
    tokens = og.Tokenizer(og.Model(str(TINY_ONNX))).encode(prompt)
    assert (done.stats.prompt_tokens, done.stats.chat_format, done.stats.tokens) == (len(tokens), "raw", 10)
    assert chat_done.stats.prompt_tokens > done.stats.prompt_tokens and text


def test_tools_need_a_template_that_takes_them(backend: OnnxBackend) -> None:
    with pytest.raises(ShapeRefused) as refused:
        _answer(backend, AnswerShape(tools=TOOLS), GenerationSettings(max_tokens=4))
    assert refused.value.failure == NoToolUse("tiny-onnx")
