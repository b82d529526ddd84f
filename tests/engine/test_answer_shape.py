"""Answer shapes on real llama.cpp (the tiny GGUF): grammars, raw prompts, tools and tool_choice.

The tiny model's weights are random, so what it writes means nothing; a grammar still
holds every token of it, which is what these check. The tools model is the tiny model
with Qwen3's own chat template (tests/fixtures/chat_templates), which takes tools.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import jsonschema
import pytest

from app.core.generation import GenerationSettings
from app.engine.backends.backend import DeviceChoice
from app.engine.control import GenerationControl
from app.engine.errors import ShapeRefused
from app.engine.failure_words import WINDOW, describe
from app.engine.failures import BadShape, NoToolUse, ShapePart
from app.engine.answers.answer_shape import PLAIN
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.backends.llama.grammar import answer_grammar
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done, Generate, Load
from tests.helpers.tiny_gguf import build_tiny_gguf

llama_cpp = pytest.importorskip("llama_cpp")
from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf  # noqa: E402

QWEN3 = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates" / "Qwen-Qwen3-0.6B.jinja"
CPU = DeviceChoice("CPU")
HELLO = (ChatMessage("user", "Hello there"),)
GREEDY = GenerationSettings(max_tokens=300, temperature=0.0, seed=1, repeat_penalty=1.0)
SCHEMA = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 12},
    "people": {"type": "integer"},  # llama-cpp-python 0.3.36's converter ignores minimum and maximum
    "coastal": {"type": "boolean"},
    "rivers": {"type": "array", "items": {"enum": ["Seine", "Loire", "Rhone"]}, "maxItems": 3}},
    "required": ["city", "people", "coastal", "rivers"], "additionalProperties": False}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city today.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time now.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}}
TOOLS = json.dumps([WEATHER, TIME])


def _load(path: Path) -> GgufBackend:
    return GgufBackend.load(Load(request_id=1, model_path=str(path), context_length=1024, threads=2), CPU)


@pytest.fixture(scope="module")
def backend(tiny_model: Path) -> Iterator[GgufBackend]:
    loaded = _load(tiny_model)
    yield loaded
    loaded.close()


@pytest.fixture(scope="module")
def tools_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GgufBackend]:
    template = QWEN3.read_text(encoding="utf-8")
    path = build_tiny_gguf(tmp_path_factory.mktemp("tools") / "tiny qwen.gguf", chat_template=template)
    loaded = _load(path)
    yield loaded
    loaded.close()


def _answer(backend: GgufBackend, shape: AnswerShape = AnswerShape(), settings: GenerationSettings = GREEDY,
            messages: tuple[ChatMessage, ...] = HELLO, stop: tuple[str, ...] = ()) -> tuple[list[Delta], Done]:
    events = list(backend.generate(Generate(7, messages, settings, stop, shape=shape), GenerationControl()))
    done = events[-1]
    assert isinstance(done, Done) and all(isinstance(e, Delta) for e in events[:-1])
    return [e for e in events[:-1] if isinstance(e, Delta)], done


def _text(deltas: list[Delta]) -> str:
    return "".join(d.text for d in deltas)


@pytest.mark.parametrize("shape", [AnswerShape(json_schema=json.dumps(SCHEMA)),
                                   AnswerShape(grammar=json_schema_to_gbnf(json.dumps(SCHEMA)))],
                         ids=["json_schema", "grammar"])
def test_a_json_schema_holds_every_token_of_the_answer(backend: GgufBackend, shape: AnswerShape) -> None:
    for settings in (GREEDY, GenerationSettings(max_tokens=300, temperature=1.5, top_k=0, top_p=1.0, seed=5)):
        deltas, done = _answer(backend, shape, settings)
        answer = json.loads(_text(deltas))
        jsonschema.validate(answer, SCHEMA)
        assert done.finish_reason == "stop", "the model's end token came once the grammar was complete"
        assert done.stats.tokens >= 20


def test_one_json_object_is_held_to_llama_cpps_own_json_grammar(backend: GgufBackend) -> None:
    """response_format json_object: the API server sends it as it is, and this backend holds the answer to
    llama.cpp's JSON_GBNF (once the server's to send as GBNF)."""
    assert answer_grammar(AnswerShape(json_object=True), PLAIN) == (JSON_GBNF, ShapePart.JSON_SCHEMA)
    # Any keys and any strings: the random tiny model may write one string until its tokens run out, so
    # what is checked is that the grammar holds from the first token (left free, it writes no "{").
    deltas, _ = _answer(backend, AnswerShape(json_object=True), GenerationSettings(max_tokens=40, temperature=0.0))
    free, _ = _answer(backend, AnswerShape(), GenerationSettings(max_tokens=40, temperature=0.0))
    assert _text(deltas).replace(" ", "").startswith('{"') and not _text(free).lstrip().startswith("{")


def test_without_a_shape_the_tiny_model_writes_no_json(backend: GgufBackend) -> None:
    # So the test above can fail: the random model left alone does not write this JSON.
    deltas, done = _answer(backend, settings=GenerationSettings(max_tokens=40, temperature=0.0, seed=1))
    with pytest.raises(ValueError):
        json.loads(_text(deltas))
    assert done.finish_reason == "length"


def test_a_grammar_llama_cpp_cannot_read_is_refused_before_the_answer(backend: GgufBackend) -> None:
    for shape, part in ((AnswerShape(grammar='root ::= "yes" | oops'), ShapePart.GRAMMAR),
                        (AnswerShape(json_schema='{"type": "object", "properties": 7}'), ShapePart.JSON_SCHEMA)):
        with pytest.raises(ShapeRefused) as refused:
            _answer(backend, shape)
        failure = refused.value.failure
        assert isinstance(failure, BadShape) and failure.part == part, failure
        assert describe(failure, WINDOW).startswith(f"The request's {part} cannot be used: ")
    assert _answer(backend, AnswerShape(grammar='root ::= "yes" | "no"'))[1].finish_reason == "stop"


def test_a_raw_prompt_is_completed_as_llama_cpp_completes_it(backend: GgufBackend, tiny_model: Path) -> None:
    prompt = "Once upon a time, <|im_start|> the falcon"
    settings = GenerationSettings(max_tokens=16, temperature=0.0, seed=1, repeat_penalty=1.0)
    deltas, done = _answer(backend, AnswerShape(prompt=prompt), settings, messages=())
    direct = llama_cpp.Llama(model_path=str(tiny_model), n_ctx=256, verbose=False)
    try:
        tokens = direct.tokenize(prompt.encode(), add_bos=True, special=True)
        expected = direct.create_completion(prompt, max_tokens=16, temperature=0.0, repeat_penalty=1.0)
    finally:
        direct.close()
    # The template is not used, the control token in the text stays one token, and BOS
    # goes in front as the model asks: the same tokens as llama.cpp's own completion.
    assert (done.stats.prompt_tokens, done.stats.chat_format, done.stats.tokens) == (len(tokens), "raw", 16)
    assert done.finish_reason == "length" and _text(deltas) == expected["choices"][0]["text"]
    assert expected["usage"]["prompt_tokens"] == len(tokens)


def test_a_raw_prompt_stops_at_a_stop_string(backend: GgufBackend) -> None:
    shape = AnswerShape(prompt="The capital of France is")
    settings = GenerationSettings(max_tokens=24, temperature=0.0, seed=1, repeat_penalty=1.0)
    whole = _text(_answer(backend, shape, settings, messages=())[0])
    stop = whole[len(whole) // 2:len(whole) // 2 + 3]
    deltas, done = _answer(backend, shape, settings, messages=(), stop=(stop,))
    assert _text(deltas) == whole[:whole.index(stop)] and done.finish_reason == "stop"
    assert 0 < done.stats.tokens < 24


def test_tools_reach_a_template_that_takes_them(tools_backend: GgufBackend) -> None:
    plain = _answer(tools_backend, settings=GenerationSettings(max_tokens=4, temperature=0.0))[1]
    with_tools = _answer(tools_backend, AnswerShape(tools=TOOLS), GenerationSettings(max_tokens=4, temperature=0.0))[1]
    unused = _answer(tools_backend, AnswerShape(tools=TOOLS, tool_choice="none"),
                     GenerationSettings(max_tokens=4, temperature=0.0))[1]
    assert with_tools.stats.prompt_tokens > plain.stats.prompt_tokens + 100, "the tools' signatures are in the prompt"
    assert unused.stats.prompt_tokens == plain.stats.prompt_tokens, 'tool_choice "none" gives the model no tools'
    prompt = tools_backend._spec(HELLO, None, _shaped(tools_backend, AnswerShape(tools=TOOLS))).text
    assert "<tools>\n" + json.dumps(WEATHER) + "\n" + json.dumps(TIME) + "\n</tools>" in prompt


def _shaped(backend: GgufBackend, shape: AnswerShape):  # type: ignore[no-untyped-def]
    from app.engine.answers.answer_shape import shape_answer

    return shape_answer(shape, backend._info.chat_template, "tiny qwen.gguf")


@pytest.mark.parametrize("choice", ["required", "get_weather"])
def test_a_required_call_is_a_call_whose_arguments_follow_the_tool(tools_backend: GgufBackend, choice: str) -> None:
    for settings in (GREEDY, GenerationSettings(max_tokens=300, temperature=1.5, top_k=0, top_p=1.0, seed=9)):
        deltas, done = _answer(tools_backend, AnswerShape(tools=TOOLS, tool_choice=choice), settings)
        calls = [d.tool_call for d in deltas if d.tool_call is not None]
        assert len(calls) == 1 and _text(deltas) == "" and done.finish_reason == "stop", deltas
        call = calls[0]
        assert call.index == 0 and call.id.startswith("call_") and len(call.id) == 29
        tool = WEATHER if call.name == "get_weather" else TIME
        assert choice == "required" or call.name == choice
        jsonschema.validate(json.loads(call.arguments), tool["function"]["parameters"])


def test_calls_and_their_results_go_back_to_the_template(tools_backend: GgufBackend) -> None:
    from app.engine.protocol import ToolCall

    call = ToolCall(0, "call_1", "get_weather", '{"city":"Paris","unit":"celsius"}')
    messages = HELLO + (ChatMessage("assistant", "", tool_calls=(call,)),
                        ChatMessage("tool", "18 degrees and sunny", tool_call_id="call_1"))
    prompt = tools_backend._spec(messages, None, _shaped(tools_backend, AnswerShape(tools=TOOLS))).text
    assert ('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": '
            '"celsius"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n18 degrees and sunny\n'
            '</tool_response><|im_end|>\n<|im_start|>assistant\n') in prompt
    assert _answer(tools_backend, AnswerShape(tools=TOOLS), GenerationSettings(max_tokens=3), messages)[1]


def test_a_template_without_tools_refuses_them_in_plain_words(backend: GgufBackend, tiny_model: Path) -> None:
    with pytest.raises(ShapeRefused) as refused:
        _answer(backend, AnswerShape(tools=TOOLS))
    assert refused.value.failure == NoToolUse(tiny_model.name)
    assert str(refused.value).startswith(f"{tiny_model.name} cannot call tools: its chat template takes none.")
    # Without tools to call ("none"), the same request is answered.
    assert _answer(backend, AnswerShape(tools=TOOLS, tool_choice="none"), GenerationSettings(max_tokens=4))[1]


@pytest.mark.parametrize(("shape", "part", "words"), [
    (AnswerShape(tools="{not json"), ShapePart.TOOLS, "they are not JSON"),
    (AnswerShape(tools="[]"), ShapePart.TOOLS, "they must be a list of at least one function"),
    (AnswerShape(tools='[{"type": "function"}]'), ShapePart.TOOLS, "tool 1 is not"),
    (AnswerShape(tools=TOOLS, tool_choice="get_moon"), ShapePart.TOOL_CHOICE,
     'there is no tool named "get_moon" among the tools given (get_weather, get_time)'),
    (AnswerShape(tool_choice="get_moon"), ShapePart.TOOL_CHOICE, "the request gives no tools"),
    (AnswerShape(tools=TOOLS, tool_choice="required", grammar='root ::= "x"'), ShapePart.GRAMMAR,
     "cannot also be held to a tool call"),
])
def test_tools_given_wrong_are_refused_saying_what_is_wrong(tools_backend: GgufBackend, shape: AnswerShape,
                                                            part: ShapePart, words: str) -> None:
    with pytest.raises(ShapeRefused) as refused:
        _answer(tools_backend, shape)
    failure = refused.value.failure
    assert isinstance(failure, BadShape) and failure.part == part and words in failure.reason


def test_a_call_the_model_writes_streams_as_a_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.engine.backends.llama.lazy_grammar import SWITCH_VARIABLE
    from tests.helpers.tool_call_gguf import TEXT, build_tool_call_gguf

    caller = _load(build_tool_call_gguf(tmp_path / "caller.gguf"))
    # The scripted call's arguments ({"zone": "UTC"}) follow get_time's schema here: under the
    # lazy grammar (test_lazy_grammar_answers.py) they must.
    zoned = {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"type": "string"}}}}}
    tools = json.dumps([zoned, {"type": "function", "function": {"name": "get_time_in", "parameters": {}}}])
    try:
        deltas, done = _answer(caller, AnswerShape(tools=tools), GenerationSettings(max_tokens=20, temperature=0.0))
        untold, _ = _answer(caller, settings=GenerationSettings(max_tokens=20, temperature=0.0))
        # Under the lazy grammar a call can only name a tool given; without it (ONNX, Gemma's
        # calls) the reader is what keeps a made-up tool's call as text.
        monkeypatch.setenv(SWITCH_VARIABLE, "0")
        told, _ = _answer(caller, AnswerShape(tools=json.dumps([WEATHER])), GenerationSettings(max_tokens=20))
    finally:
        caller.close()
    calls = [d.tool_call for d in deltas if d.tool_call is not None]
    assert _text(deltas) == TEXT and done.finish_reason == "stop" and not any(d.thinking for d in deltas)
    assert [(c.index, c.name, c.arguments) for c in calls] == [(0, "get_time", '{"zone":"UTC"}')]
    assert deltas[-1].tool_call is calls[0] and deltas[-1].text == ""
    # A call to a tool it was not given, or with no tools at all, stays text.
    assert not any(d.tool_call for d in told) and "get_time" in _text(told) and "[Kestrel:" in _text(told)
    assert not any(d.tool_call for d in untold) and _text(untold).startswith(TEXT + "<tool_call>")


def test_a_grammar_past_llama_cpps_bounds_is_refused_before_llama_cpp_parses_it(backend: GgufBackend) -> None:
    # Issue 35, item 1: 20,000 nested groups (maxLength 20,000 as the converter writes it) overflowed
    # llama.cpp's parser stack and killed the engine; the backend refuses them, and a schema past the
    # bounds, before llama.cpp sees either, whoever handed them over.
    deep = "root ::= " + "(" * 20_000 + '"a"' + ")" * 20_000 + "\n"
    long_string = json.dumps({"type": "string", "maxLength": 100_000})
    for shape, part, said in ((AnswerShape(grammar=deep), ShapePart.GRAMMAR, "nests groups more than 1,024 deep"),
                              (AnswerShape(json_schema=long_string), ShapePart.JSON_SCHEMA, "maxLength 100,000")):
        with pytest.raises(ShapeRefused) as refused:
            _answer(backend, shape)
        failure = refused.value.failure
        assert isinstance(failure, BadShape) and failure.part == part, failure
        assert said in describe(failure, WINDOW), describe(failure, WINDOW)
    assert _answer(backend, AnswerShape(grammar='root ::= "yes" | "no"'))[1].finish_reason == "stop"
