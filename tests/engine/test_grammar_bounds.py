"""The bounds of a grammar (app/engine/grammar_bounds.py, gbnf_bounds.py): schemas and GBNF past them are
refused in words, what is within them is taken, and llama.cpp survives the worst grammar they let through.

llama.cpp is probed in a child process, so that a grammar that overflows its stack fails the test
instead of ending the test run; the probe runs on a thread with a 1 MB stack (a Windows thread's).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

from app.engine.answers.answer_shape import shape_answer
from app.engine.backends.llama.grammar import answer_grammar, refuse_unbounded, schema_grammar
from app.engine.errors import ShapeRefused
from app.engine.failures import BadShape, ShapePart
from app.engine.backends.llama.gbnf_bounds import grammar_problem
from app.engine.grammar_bounds import (MAX_CHOICES, MAX_DEPTH, MAX_GRAMMAR_BYTES, MAX_GROUP_DEPTH, MAX_LEFT_DEPTH,
                                       MAX_REPEAT, SchemaWalk, schema_problem)
from app.engine.backends.llama.lazy_grammar import LazyCallGrammar
from app.engine.protocol import AnswerShape
from app.engine.tool_calls.tool_calls import ToolCallReader, ToolFamily

QWEN3 = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates" / "Qwen-Qwen3-0.6B.jinja"


def _gbnf(schema: dict[str, Any]) -> str:
    return str(json_schema_to_gbnf(json.dumps(schema)))


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels - 1):
        schema = {"type": "array", "items": schema}
    return schema


# --- schemas -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("schema", "keyword", "path"), [
    ({"type": "string", "maxLength": 100_000}, "maxLength", "$"),
    ({"type": "array", "items": {"type": "string"}, "minItems": 10_000, "maxItems": 100_000}, "maxItems", "$"),
    ({"type": "object", "properties": {"name": {"type": "string", "minLength": 10**8}}}, "minLength", "$.properties.name"),
    ({"type": "string", "minLength": 1e300}, "minLength", "$"),
    ({"enum": list(range(MAX_CHOICES + 1))}, "enum", "$"),
    ({"anyOf": [{"const": n} for n in range(MAX_CHOICES + 1)]}, "anyOf", "$"),
    ({"type": "object", "properties": {f"p{n}": {} for n in range(MAX_CHOICES + 1)}}, "properties", "$"),
    ({"type": "string", "pattern": "^a{5000}$"}, "pattern", "$"),
    ({"type": "string", "pattern": "^a{1," + "9" * 5000 + "}$"}, "pattern", "$"),
    ({"$defs": {"big": {"type": "string", "maxLength": 5000}}, "$ref": "#/$defs/big"}, "maxLength", "$.$defs.big"),
    ({"type": "object", "properties": {"a b": {"type": "array", "maxItems": 2000}}}, "maxItems", "$.properties['a b']"),
    (_nested(900), "nesting", "$.items.items"),
    ({"type": "object", "properties": {f"p{n}": {"type": "string", "maxLength": 1000} for n in range(200)}},
     "grammar", "$"),
])
def test_a_schema_past_a_bound_is_named_by_keyword_and_path(schema: dict[str, Any], keyword: str, path: str) -> None:
    problem = schema_problem(schema)
    assert problem is not None and problem.keyword == keyword and problem.path.startswith(path), problem
    assert f"at {problem.path} is more than Kestrel's grammars can hold (at most" in problem.words()


@pytest.mark.parametrize("schema", [
    {"type": "string", "maxLength": MAX_REPEAT, "minLength": MAX_REPEAT},
    {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": MAX_REPEAT},
    {"enum": [f"value {n}" for n in range(MAX_CHOICES)]},
    {"type": "string", "pattern": "^[a-z]{1,64}@[a-z]{2,255}\\.(com|org)$"},
    {"type": "string", "pattern": "^\\{99999\\}[{]$"},  # braces escaped or in a class are no repeats
    {"type": "object", "properties": {"maxLength": {"type": "string"}, "enum": {"type": "integer"}}},  # names, not keywords
    {"type": "string", "maxLength": 5000.5 - 5000.5, "description": "x" * 2_000_000},  # a long description is no grammar
    {"type": "object", "properties": {"x": {"type": "string", "default": {"maxLength": 10**9}}}},  # data, not schema
    {"type": "string", "minLength": float("nan")},  # no count: the converter says what is wrong with it
    _nested(MAX_DEPTH // 2),
])
def test_a_schema_within_the_bounds_passes(schema: dict[str, Any]) -> None:
    assert schema_problem(schema) is None


def test_the_tools_of_one_grammar_share_its_size() -> None:
    tool = {"type": "object", "properties": {f"p{n}": {"type": "string", "maxLength": 1000} for n in range(70)}}
    assert schema_problem(tool) is None
    walk = SchemaWalk()
    assert walk.problem(tool) is None
    problem = walk.problem(tool)
    assert problem is not None and problem.keyword == "grammar"


# --- grammars ----------------------------------------------------------------------------------------------------

def _nest(levels: int) -> str:
    return 'root ::= "\\"" ' + "(char " * levels + ")?" * levels + ' "\\""\nchar ::= [^"\\\\]\n'


def _groups(levels: int) -> str:
    """Groups in groups (llama.cpp refuses 1,000 optional ones itself, but not these)."""
    return "root ::= " + "(" * levels + '"a"' + ")" * levels + "\n"


def _chain(links: int) -> str:
    """Each rule starts with the next: llama.cpp's sampler goes down all of them at once."""
    return "root ::= r0\n" + "".join(f'r{n} ::= r{n + 1} "x"\n' for n in range(links)) + f'r{links} ::= "y"\n'


def _optional_chain(links: int) -> str:
    """An object's optional properties: each rule starts with an optional group, then the next rule."""
    return 'root ::= "{" r0\nkv ::= "k"\n' + "".join(f'r{n} ::= ("," kv)? r{n + 1}\n' for n in range(links)) + \
        f'r{links} ::= "}}"\n'


def _enum(values: int) -> str:
    return "root ::= " + " | ".join(f'"\\"value{n}\\""' for n in range(values)) + "\n"


# The worst grammars the bounds let through: each just within one bound.
AT_THE_BOUNDS = {
    "maxLength": _gbnf({"type": "string", "maxLength": MAX_REPEAT}),
    "maxItems": _gbnf({"type": "array", "items": {"type": "string"}, "maxItems": MAX_REPEAT}),
    "groups": _groups(MAX_GROUP_DEPTH),
    "chain": _chain(MAX_LEFT_DEPTH - 3),
    "optional chain": _optional_chain(MAX_LEFT_DEPTH // 3 - 2),
    "enum": _enum(MAX_CHOICES),
    "size": _gbnf({"type": "object", "properties": {f"p{n}": {"type": "string", "maxLength": 1000}
                                                    for n in range(120)}}),
}
PAST_THE_BOUNDS = {
    "groups": _groups(MAX_GROUP_DEPTH + 1),
    "chain": _chain(MAX_LEFT_DEPTH),
    "optional chain": _optional_chain(MAX_LEFT_DEPTH // 3 + 2),
    "enum": _enum(MAX_CHOICES + 1),
    "repeat": 'root ::= "a"{1001}\n',
    "huge repeat": 'root ::= "a"{0,' + "9" * 5000 + "}\n",
    "left recursion": 'root ::= x\nx ::= ("a")? x "b" | "c"\n',
    "size": "root ::= " + '"a" ' * (MAX_GRAMMAR_BYTES // 4) + "\n",
    "unbalanced": 'root ::= ("a"\n',
    "not gbnf": "root = 'a'\n",
}


@pytest.mark.parametrize("name", AT_THE_BOUNDS)
def test_a_grammar_at_the_bounds_passes(name: str) -> None:
    assert grammar_problem(AT_THE_BOUNDS[name]) is None


@pytest.mark.parametrize("name", PAST_THE_BOUNDS)
def test_a_grammar_past_a_bound_is_refused_in_words(name: str) -> None:
    why = grammar_problem(PAST_THE_BOUNDS[name])
    assert why is not None and why.startswith(("the grammar", "a rule of the grammar")), why


_PROBE = """
import json, sys, threading, llama_cpp
params = llama_cpp.llama_model_default_params()
params.vocab_only = True
model = llama_cpp.llama_model_load_from_file(sys.argv[1].encode(), params)
vocab = llama_cpp.llama_model_get_vocab(model)
grammars = json.load(open(sys.argv[2], encoding="utf-8"))
def parse():
    for name, text in grammars.items():
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode(), b"root")
        print(name, "read" if sampler else "refused", flush=True)
        if sampler:
            llama_cpp.llama_sampler_free(sampler)
threading.stack_size(1 << 20)
thread = threading.Thread(target=parse)
thread.start()
thread.join()
"""


def _probe(tiny_model: Path, folder: Path, grammars: dict[str, str]) -> subprocess.CompletedProcess[str]:
    listed = folder / "grammars.json"
    listed.write_text(json.dumps(grammars), encoding="utf-8")
    return subprocess.run([sys.executable, "-c", _PROBE, str(tiny_model), str(listed)], capture_output=True, text=True,
                          timeout=120)


# What llama.cpp itself reads: line breaks after ::= and |, comments, escapes, token and any-character terminals.
LLAMA_CPP_FORMS = {
    "json": JSON_GBNF,
    "lines": 'root ::= x\nx ::=\n  "a" |\n  ( "b"\n "c" ) # a comment\n',
    "terminals": 'root ::= [^"\\\\] "\\"]" <[123]> . "é"{2,} x? "w"*\nx ::= "" | "y"\n',
}


def test_llama_cpps_own_grammar_forms_are_read(tiny_model: Path, tmp_path: Path) -> None:
    assert all(grammar_problem(text) is None for text in LLAMA_CPP_FORMS.values())
    done = _probe(tiny_model, tmp_path, LLAMA_CPP_FORMS)
    assert done.stdout.split() == [word for name in LLAMA_CPP_FORMS for word in (name, "read")], done.stderr[-2000:]


def test_llama_cpp_survives_every_grammar_at_the_bounds_on_a_1_mb_stack(tiny_model: Path, tmp_path: Path) -> None:
    done = _probe(tiny_model, tmp_path, AT_THE_BOUNDS)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [word for name in AT_THE_BOUNDS for word in (*name.split(), "read")]


def test_the_probe_sees_a_crash_that_the_bounds_keep_out(tiny_model: Path, tmp_path: Path) -> None:
    """maxLength 20,000 as the converter writes it: 20,000 nested groups, past llama.cpp's stack."""
    deep = _nest(20_000)
    assert grammar_problem(deep) is not None
    assert _probe(tiny_model, tmp_path, {"deep": deep}).returncode < 0, "llama.cpp survived: the probe shows nothing"


# --- in the engine: a forced call is refused, a lazy one stays free -----------------------------------------------

def _tools(parameters: dict[str, Any]) -> str:
    return json.dumps([{"type": "function", "function": {"name": "get_time", "parameters": parameters}}])


@pytest.mark.parametrize("parameters", [{"type": "string", "maxLength": 100_000}, {"$ref": "#"}, _nested(900)])
def test_a_forced_call_past_the_bounds_is_refused_naming_the_tool(parameters: dict[str, Any]) -> None:
    shape = AnswerShape(tools=_tools(parameters), tool_choice="required")
    shaped = shape_answer(shape, QWEN3.read_text(), "m")  # the shape itself is fine: only llama.cpp builds a grammar
    with pytest.raises(ShapeRefused) as refused:
        answer_grammar(shape, shaped)
    failure = refused.value.failure
    assert isinstance(failure, BadShape) and failure.part is ShapePart.TOOLS and '"get_time"' in failure.reason


def test_the_lazy_grammar_leaves_a_call_free_without_handing_llama_cpp_the_grammar() -> None:
    tools = json.loads(_tools({"type": "object", "properties": {"zone": {"type": "string", "minLength": 10**8}}}))
    handed: list[str] = []
    lazy = LazyCallGrammar(ToolFamily.HERMES, tools, lambda grammar: handed.append(grammar) is None)
    reader = ToolCallReader(ToolFamily.HERMES, {"get_time"})
    reader.feed("<tool_call>")
    lazy.observe(reader)
    assert lazy.take() is None and lazy.switches == 0 and handed == []


def test_a_json_schema_shape_is_refused_before_conversion_and_a_raw_grammar_before_llama_cpp() -> None:
    with pytest.raises(ShapeRefused) as schema:
        schema_grammar(json.dumps({"type": "string", "minLength": 10**9}))
    assert isinstance(schema.value.failure, BadShape) and "minLength 1,000,000,000 at $" in schema.value.failure.reason
    assert '"\\"ok\\""' in schema_grammar(json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}}}))
    with pytest.raises(ShapeRefused) as grammar:
        refuse_unbounded(_nest(20_000), ShapePart.GRAMMAR)
    assert isinstance(grammar.value.failure, BadShape) and grammar.value.failure.part is ShapePart.GRAMMAR
    refuse_unbounded(JSON_GBNF, ShapePart.GRAMMAR)


def test_neither_check_raises_on_anything() -> None:
    """Seeded random GBNF-ish text and JSON-ish values: an answer every time, never an exception."""
    rng = random.Random(35)
    pieces = ["root", " ::= ", "x", "::=", '"a"', '""', "[a-z]", "(", ")", "|", "?", "*", "+", "{2,5}", "{,}", "{3}",
              "\n", " ", "#c\n", "<tok>", ".", "\\", '"', "[", "]", "{", "}", "é"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        assert grammar_problem(text) is None or isinstance(grammar_problem(text), str)
    scalars: list[Any] = [None, True, 0, -1, 1e308, float("inf"), float("-inf"), float("nan"), "x", 10**30, 2.5]
    keys = ["type", "items", "properties", "enum", "anyOf", "maxLength", "minItems", "pattern", "$ref", "x"]

    def value(depth: int) -> Any:
        roll = rng.random()
        if depth > 4 or roll < 0.4:
            return rng.choice(scalars + ["^a{3,7}$", "#", "#/x"])
        if roll < 0.6:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(keys): value(depth + 1) for _ in range(rng.randint(0, 4))}

    for _ in range(3000):
        problem = schema_problem(value(0))
        assert problem is None or problem.words()
