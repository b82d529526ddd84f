"""Answers under the lazy tool-call grammar on real llama.cpp: a scripted caller's calls held to the tools.

The caller is the tiny GGUF with Qwen3's template and lookup-table weights (as in
tests/helpers/tool_call_gguf.py): each token of a script calls the next, so left alone it writes

    Checking.<tool_call>{"name": "get_time", ...}</tool_call>Then.<tool_call>{"name": "get_weather", ...}</tool_call>Done.

The second call's markers are spelt in two tokens each (`<tool` `_call>`, `</tool_` `call>`) so that no token
repeats. When a tool's schema does not allow the scripted arguments, the grammar rejects the
scripted token and the model must write a call that does validate, whatever it would have written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest

from app.core.generation import GenerationSettings
from app.engine.backends.backend import DeviceChoice
from app.engine.control import GenerationControl
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.backends.llama.lazy_grammar import SWITCH_VARIABLE
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done, Generate, Load, ToolCall
from tests.helpers.tiny_gguf import build_tiny_gguf, scripted_weights
from tests.helpers.tool_call_gguf import QWEN3_TEMPLATE

CALL_1 = '{"name": "get_time", "arguments": {"zone": "UTC"}}'
CALL_2 = '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}'
_SCRIPT = ["<0x0A>", "Checking.", "<tool_call>", CALL_1, "</tool_call>", "Then.", "<tool", "_call>", CALL_2,
           "</tool_", "call>", "Done."]


def _tools(zone: dict[str, Any], unit: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": "get_time", "parameters": {
            "type": "object", "properties": {"zone": zone}, "required": ["zone"], "additionalProperties": False}}},
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "unit": unit},
            "required": ["city", "unit"], "additionalProperties": False}}},
    ]


# The scripted calls validate against these tools...
LOOSE = _tools({"type": "string"}, {"enum": ["celsius", "fahrenheit"]})
# ...and not against these: "UTC" and "celsius" are not allowed.
STRICT = _tools({"enum": ["CET", "EST"]}, {"enum": ["kelvin"]})


# Qwen2.5-Coder's habit: the call as bare JSON, held once it names a tool given.
_BARE_SCRIPT = ["<0x0A>", '{"name": "get_time"', ', "arguments": ', '{"zone": "UTC"}}', "Done."]


def _caller(folder: Path, script: list[str]) -> GgufBackend:
    path = build_tiny_gguf(folder / "caller.gguf", name="kestrel-caller",
                           chat_template=QWEN3_TEMPLATE.read_text(encoding="utf-8"), added_tokens=tuple(script[1:]),
                           weights=scripted_weights(script, only_script_rows=True))
    return GgufBackend.load(Load(request_id=1, model_path=str(path), context_length=1024, threads=2),
                            DeviceChoice("CPU"))


@pytest.fixture(scope="module")
def caller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GgufBackend]:
    backend = _caller(tmp_path_factory.mktemp("caller"), _SCRIPT)
    yield backend
    backend.close()


def _answer(backend: GgufBackend, tools: list[dict[str, Any]], seed: int = 1, temperature: float = 0.0,
            max_tokens: int = 120) -> tuple[str, list[ToolCall], Done]:
    settings = GenerationSettings(max_tokens=max_tokens, temperature=temperature, seed=seed, top_k=0, top_p=1.0,
                                  repeat_penalty=1.0)
    request = Generate(3, (ChatMessage("user", "What time is it, and the weather?"),), settings, (),
                       shape=AnswerShape(tools=json.dumps(tools)))
    events = list(backend.generate(request, GenerationControl()))
    done = events[-1]
    assert isinstance(done, Done)
    deltas = [event for event in events[:-1] if isinstance(event, Delta)]
    return "".join(d.text for d in deltas), [d.tool_call for d in deltas if d.tool_call is not None], done


def _valid(call: ToolCall, tools: list[dict[str, Any]]) -> bool:
    schema = next(tool["function"]["parameters"] for tool in tools if tool["function"]["name"] == call.name)
    try:
        jsonschema.validate(json.loads(call.arguments), schema)
    except jsonschema.ValidationError:
        return False
    return True


def test_two_calls_with_text_before_between_and_after(caller: GgufBackend) -> None:
    text, calls, done = _answer(caller, LOOSE)
    assert [(c.index, c.name, json.loads(c.arguments)) for c in calls] == [
        (0, "get_time", {"zone": "UTC"}), (1, "get_weather", {"city": "Paris", "unit": "celsius"})]
    assert text == "Checking.Then.Done." and done.finish_reason == "stop"
    assert caller.held_calls == 2, "each call was written under the grammar, and sampling was free between"


def test_arguments_the_schema_refuses_are_written_so_that_they_validate(caller: GgufBackend) -> None:
    for seed, temperature in ((1, 0.0), (2, 1.0), (3, 1.5)):
        text, calls, done = _answer(caller, STRICT, seed, temperature)
        assert calls and all(_valid(call, STRICT) for call in calls), (text, calls)
        assert text.startswith("Checking.") and done.finish_reason in ("stop", "length")
        # One more held when the token limit ended the answer inside a call (shown as text with a note).
        assert caller.held_calls == len(calls) + (done.finish_reason == "length")


def test_without_the_grammar_the_same_calls_do_not_validate(caller: GgufBackend,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SWITCH_VARIABLE, "0")  # so the test above can fail
    text, calls, _ = _answer(caller, STRICT)
    assert [c.name for c in calls] == ["get_time", "get_weather"] and not any(_valid(c, STRICT) for c in calls)
    assert text == "Checking.Then.Done." and caller.held_calls == 0


def test_a_call_written_as_bare_json_is_held_once_it_names_a_tool(tmp_path: Path) -> None:
    bare = _caller(tmp_path, _BARE_SCRIPT)
    try:
        text, calls, _ = _answer(bare, LOOSE, max_tokens=20)
        assert [(c.name, c.arguments) for c in calls] == [("get_time", '{"zone":"UTC"}')] and text == "Done."
        assert bare.held_calls == 1
        text, calls, _ = _answer(bare, STRICT, max_tokens=40)
        assert [c.name for c in calls] == ["get_time"] and _valid(calls[0], STRICT), (text, calls)
        assert bare.held_calls == 1
    finally:
        bare.close()
