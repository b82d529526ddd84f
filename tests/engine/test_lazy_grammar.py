"""The lazy tool-call grammar: what must follow an opened call per family, and that llama.cpp reads it.

Generation under it, on real llama.cpp with a scripted caller, is in test_lazy_grammar_answers.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import llama_cpp
import pytest

from app.engine.answers.answer_shape import shape_answer
from app.engine.backends.llama.lazy_grammar import SWITCH_VARIABLE, LazyCallGrammar, Switch, lazy_grammar_for, rest_grammar
from app.engine.protocol import AnswerShape
from app.engine.backends.llama.tool_call_rest import WAIT, CallRest, call_rest, held
from app.engine.tool_calls.tool_calls import ToolCallReader, ToolFamily

TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"enum": ["CET", "EST"]}}, "required": ["zone"]}}}
PLAN = {"type": "function", "function": {"name": "plan", "parameters": {
    "type": "object", "properties": {"steps": {"type": "array", "items": {"$ref": "#/$defs/Step"}, "maxItems": 2}},
    "required": ["steps"],
    "$defs": {"Step": {"type": "object", "properties": {"title": {"enum": ["a", "b"]}}, "required": ["title"]}}}}}
NOW = {"type": "function", "function": {"name": "now"}}
TOOLS: list[dict[str, Any]] = [TIME, PLAN, NOW]
NAMES = {"get_time", "plan", "now"}


@pytest.mark.parametrize(("family", "text", "root", "tool"), [
    ("hermes", "<tool_call>", 'ws call ws "</tool_call>"', None),
    ("hermes", "<tool_call>\n", 'ws call ws "</tool_call>"', None),
    ("hermes", '<tool_call>\n{"name": "plan",', 'ws "\\"arguments\\"" ws ":" ws args ws "}" ws "</tool_call>"', "plan"),
    ("hermes", '{"name": "get_time"', 'ws "," ws "\\"arguments\\"" ws ":" ws args ws "}"', "get_time"),
    ("hermes", '{"name": "get_time", "arg', '"uments\\"" ws ":" ws args ws "}"', "get_time"),
    ("hermes", '```json\n{"name":"now", "arguments": ', ' ws args ws "}" ws "```"', "now"),
    ("llama3", "<|python_tag|>", "ws call", None),
    ("mistral", "[TOOL_CALLS][", 'ws call (ws "," ws call)* ws "]"', None),
    ("mistral", "[TOOL_CALLS]plan[CALL_ID]a1b2[ARGS]", "args", "plan"),
    ("phi4", "<|tool_call|>", 'ws (call | "[" ws call (ws "," ws call)* ws "]") (ws "<|/tool_call|>")?', None),
    ("gpt_oss", "<|channel|>commentary to=functions.now <|constrain|>json<|message|>", 'args (ws "<|call|>")?', "now"),
])
def test_an_opened_call_says_what_must_follow(family: str, text: str, root: str, tool: str | None) -> None:
    rest = call_rest(family, text, NAMES)
    assert isinstance(rest, CallRest) and (rest.root, rest.tool) == (root, tool)
    assert rest.key == ("parameters" if family == "llama3" else "arguments")


@pytest.mark.parametrize(("family", "text", "decision"), [
    ("hermes", '<tool_call>\n{"na', WAIT),  # the name is not written yet
    ("hermes", '{"name": "pl', WAIT),
    ("hermes", "```json\n", WAIT),
    ("mistral", "[TOOL_CALLS]", WAIT),
    ("mistral", "[TOOL_CALLS]get_ti", WAIT),
    ("gpt_oss", "<|channel|>commentary to=functions.now", WAIT),
    ("hermes", '{"name": "Bob", "age": 3', None),  # ordinary JSON stays free
    ("hermes", '{"city": "Paris"', None),
    ("hermes", '{"name": "get_time", "arguments": {"zone"', None),  # too late: inside the arguments
    ("hermes", '{"arguments": {}, "name": "now"', None),
    ("mistral", "[TOOL_CALLS]forecast[ARGS]", None),  # a tool it was not given
    ("gpt_oss", "<|channel|>analysis<|message|>", None),  # no recipient: not a call
    ("gemma", "<start_function_call>", None),  # not JSON: never held
])
def test_a_call_waits_or_stays_free_when_no_grammar_can_start(family: str, text: str, decision: object) -> None:
    assert call_rest(family, text, NAMES) is decision


def test_only_gemma_calls_are_never_held() -> None:
    assert [family for family in ToolFamily if not held(family.value)] == [ToolFamily.GEMMA]


@pytest.fixture(scope="module")
def vocab(tiny_model: Path) -> Iterator[Any]:
    model = llama_cpp.Llama(model_path=str(tiny_model), n_ctx=64, verbose=False)
    yield model._model.vocab
    model.close()


def _readable(vocab: Any, grammar: str) -> bool:
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    if sampler:
        llama_cpp.llama_sampler_free(sampler)
    return bool(sampler)


@pytest.mark.parametrize("text", ["<tool_call>", '```json\n{"name": "plan"', "[TOOL_CALLS][", "<|tool_call|>",
                                  "[TOOL_CALLS]plan[ARGS]", "<|channel|>commentary to=functions.now<|message|>",
                                  "<|python_tag|>"])
def test_llama_cpp_reads_every_rest_grammar(vocab: Any, text: str) -> None:
    family = {"<|python_tag|>": "llama3", "[TOOL_CALLS]": "mistral", "<|tool_call|>": "phi4",
              "<|channel|>": "gpt_oss"}.get(next((o for o in ("<|python_tag|>", "[TOOL_CALLS]", "<|tool_call|>",
                                                             "<|channel|>") if text.startswith(o)), ""), "hermes")
    rest = call_rest(family, text, NAMES)
    assert isinstance(rest, CallRest)
    grammar = rest_grammar(rest, TOOLS)
    assert _readable(vocab, grammar), grammar
    assert not _readable(vocab, grammar.replace("root ::= ", "root ::= missing ")), "the check can fail"


def test_rule_names_of_the_two_grammars_never_meet() -> None:
    grammar = rest_grammar(CallRest('ws call ws "x"'), TOOLS) + rest_grammar(CallRest("args", tool="plan"), TOOLS)
    rules = [line.split(" ::=")[0] for line in grammar.splitlines()]
    assert rules.count("root") == 2 and rules.count("ws") == 2  # the two grammars, each once
    assert all(rule in ("root", "ws", "call", "args") or rule.startswith(("call-", "args-")) for rule in rules)
    assert '"\\"steps\\""' in grammar and "[^\"\\\\]" in grammar, "literals and classes kept as written"


def _reader_and_lazy(usable: bool = True) -> tuple[ToolCallReader, LazyCallGrammar]:
    return ToolCallReader(ToolFamily.HERMES, NAMES), LazyCallGrammar(ToolFamily.HERMES, TOOLS, lambda _: usable)


def test_the_grammar_switches_on_when_a_call_opens_and_off_when_it_closes() -> None:
    reader, lazy = _reader_and_lazy()
    for piece in ("Let me look.", " <tool", "_call>"):
        assert lazy.take() is None
        reader.feed(piece)
        lazy.observe(reader)
    switch = lazy.take()
    assert switch is not None and switch.grammar is not None and switch.grammar.startswith("root ::= ws call")
    assert lazy.take() is None, "a switch is handed over once"
    reader.feed('\n{"name": "now", "arguments": {}}\n')
    lazy.observe(reader)
    assert lazy.take() is None, "held until the call closes"
    reader.feed("</tool_call>")
    lazy.observe(reader)
    assert lazy.take() == Switch(None) and lazy.switches == 1
    reader.feed('Then <tool_call>{"name": "pl')
    lazy.observe(reader)
    assert lazy.take() is None, "this call opened further on than its marker: it waits for the name"
    reader.feed('an",')
    lazy.observe(reader)
    second = lazy.take()
    assert second is not None and second.grammar is not None and "args ::=" in second.grammar and lazy.switches == 2


def test_a_grammar_the_backend_cannot_read_leaves_the_call_free() -> None:
    reader, lazy = _reader_and_lazy(usable=False)
    reader.feed("<tool_call>")
    lazy.observe(reader)
    assert lazy.take() is None and lazy.switches == 0


def test_only_auto_calls_in_a_held_family_get_a_lazy_grammar(monkeypatch: pytest.MonkeyPatch) -> None:
    qwen = (Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates" / "Qwen-Qwen3-0.6B.jinja").read_text()
    tools = json.dumps(TOOLS)
    auto = shape_answer(AnswerShape(tools=tools), qwen, "m")
    assert lazy_grammar_for(auto, lambda _: True) is not None
    assert lazy_grammar_for(shape_answer(AnswerShape(tools=tools, tool_choice="required"), qwen, "m"),
                            lambda _: True) is None, "a forced call is held whole already"
    assert lazy_grammar_for(shape_answer(AnswerShape(), qwen, "m"), lambda _: True) is None
    monkeypatch.setenv(SWITCH_VARIABLE, "0")
    assert lazy_grammar_for(auto, lambda _: True) is None
