"""The call grammar made from the tools' schemas is one llama.cpp accepts, and it holds a model to them.

The tiny model knows nothing, so whatever it writes under the grammar is the grammar's doing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import llama_cpp
import pytest

from app.engine.backends.llama.grammar import arguments_grammar

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "set_unit", "description": "Set the unit.", "parameters": {
        "type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]},
                                         "days": {"type": "integer", "enum": [1, 2, 3]}},
        "required": ["unit", "days"]}}},
    {"type": "function", "function": {"name": "now", "description": "The time (takes nothing)."}},
    {"type": "function", "function": {"name": "plan", "parameters": {
        "type": "object", "properties": {"steps": {"type": "array", "items": {"$ref": "#/$defs/Step"},
                                                "maxItems": 3}},
        "required": ["steps"],
        "$defs": {"Step": {"type": "object", "properties": {"title": {"enum": ["a", "b"]}}, "required": ["title"]}}}}},
]


@pytest.fixture(scope="module")
def llm(tiny_model: Path) -> Iterator[llama_cpp.Llama]:
    model = llama_cpp.Llama(model_path=str(tiny_model), n_ctx=256, seed=1, verbose=False)
    yield model
    model.close()


def parses(llm: llama_cpp.Llama, grammar: str) -> bool:
    """Whether llama.cpp's own grammar parser takes the text (LlamaGrammar.from_string does not parse)."""
    sampler = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, grammar.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def test_llama_cpp_accepts_the_grammar(llm: llama_cpp.Llama) -> None:
    grammar = arguments_grammar(TOOLS)
    llama_cpp.LlamaGrammar.from_string(grammar)
    assert parses(llm, grammar)
    assert parses(llm, arguments_grammar(TOOLS, only="plan"))
    assert not parses(llm, grammar.replace("root ::=", "root ::= (", 1))  # the check can fail


def test_the_grammar_is_an_alternation_over_the_tools() -> None:
    grammar = arguments_grammar(TOOLS)
    root = next(line for line in grammar.splitlines() if line.startswith("root ::="))
    assert root.count("|") == len(TOOLS) - 1
    for name in ("set_unit", "now", "plan"):
        assert f'"\\"{name}\\""' in grammar
    only = arguments_grammar(TOOLS, only="set_unit")
    assert '"\\"set_unit\\""' in only and "plan" not in only and "|" not in only.split("root ::=")[1].splitlines()[0]


def test_asking_for_a_tool_not_given_is_a_bug() -> None:
    with pytest.raises(ValueError):
        arguments_grammar(TOOLS, only="missing")
    with pytest.raises(ValueError):
        arguments_grammar([])


@pytest.mark.parametrize("only", ["set_unit", "plan", None])
def test_a_model_under_the_grammar_writes_a_call_that_validates(llm: llama_cpp.Llama, only: str | None) -> None:
    grammar = llama_cpp.LlamaGrammar.from_string(arguments_grammar(TOOLS, only=only))
    schemas = {tool["function"]["name"]: tool["function"].get("parameters", {"type": "object"}) for tool in TOOLS}
    for seed in range(3):
        answer = llm.create_completion("Call:", max_tokens=120, temperature=1.0, seed=seed, grammar=grammar)
        call = json.loads(answer["choices"][0]["text"])
        assert set(call) == {"name", "arguments"}
        assert only is None or call["name"] == only
        jsonschema.validate(call["arguments"], schemas[call["name"]])

