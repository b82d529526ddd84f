"""The GBNF grammars llama.cpp holds an answer to, built here from the answer's shape, in the engine.

An answer's shape arrives as the request gave it (a JSON schema, one JSON object, tools); only
this backend reads GBNF, so only it turns them into GBNF, with llama-cpp-python's converter
(llama_cpp/llama_grammar.py). A schema is held to what llama.cpp can hold before it is converted
(app/engine/grammar_bounds.py) and the grammar after (gbnf_bounds.py), whoever made it: llama.cpp's
parser and sampler recurse on deep grammars until the engine dies. The API server checks a
schema's bounds too, before the engine sees it, so that a client hears which keyword and where.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from app.engine.answers.answer_shape import ShapedAnswer
from app.engine.backends.llama.gbnf_bounds import grammar_problem
from app.engine.errors import ShapeRefused
from app.engine.failures import BadShape, ShapePart
from app.engine.grammar_bounds import GrammarTooBig, SchemaWalk, schema_problem
from app.engine.protocol import AnswerShape


def answer_grammar(shape: AnswerShape, shaped: ShapedAnswer) -> tuple[str, ShapePart] | None:
    """The GBNF the whole answer follows, and the part of the shape it came from: the forced call's,
    the grammar asked for, the JSON schema's or any JSON object's (None: the answer is free); a forced
    call and a grammar both count as the grammar part.
    ShapeRefused when it cannot be made or is past what llama.cpp can hold."""
    if shape.json_schema is not None and not shaped.forced and shape.grammar is None:
        return schema_grammar(shape.json_schema), ShapePart.JSON_SCHEMA  # checked, before and after
    if shaped.forced or shape.grammar is not None:
        text = call_grammar(shaped) if shaped.forced else str(shape.grammar)
        refuse_unbounded(text, ShapePart.GRAMMAR)
        return text, ShapePart.GRAMMAR
    if shape.json_object:
        return json_object_grammar(), ShapePart.JSON_SCHEMA
    return None


def json_object_grammar() -> str:
    """llama.cpp's own grammar for one JSON object of any keys (response_format json_object)."""
    from llama_cpp.llama_grammar import JSON_GBNF  # loads llama.cpp: only in the engine, when asked

    return str(JSON_GBNF)


def schema_grammar(schema_text: str) -> str:
    """GBNF for an answer's JSON schema (AnswerShape.json_schema); ShapeRefused when it is not JSON,
    is past what llama.cpp's grammars can hold (checked before it is converted), or the converter
    cannot read it."""
    try:
        schema = json.loads(schema_text)
    except (ValueError, RecursionError) as exc:
        raise ShapeRefused(BadShape(ShapePart.JSON_SCHEMA, f"it is not JSON ({type(exc).__name__})")) from None
    problem = schema_problem(schema)
    if problem is not None:
        raise ShapeRefused(BadShape(ShapePart.JSON_SCHEMA, problem.words()))
    from llama_cpp.llama_grammar import json_schema_to_gbnf  # loads llama.cpp: only in the engine, when asked

    try:
        text = str(json_schema_to_gbnf(schema_text))
    except Exception as exc:  # noqa: BLE001 - the converter fails on bad schemas in many ways
        raise ShapeRefused(BadShape(ShapePart.JSON_SCHEMA, f"llama.cpp cannot follow it ({exc})")) from None
    refuse_unbounded(text, ShapePart.JSON_SCHEMA)
    return text


def call_grammar(shaped: ShapedAnswer) -> str:
    """The forced call's grammar (tool_choice "required" or a tool's name): the neutral call object of
    the tools allowed. ShapeRefused when a tool's parameters cannot be one (past what llama.cpp can
    hold, or not a schema the converter reads)."""
    try:
        return arguments_grammar(shaped.tools or (), shaped.only)
    except GrammarTooBig as too_big:
        raise ShapeRefused(BadShape(ShapePart.TOOLS, str(too_big))) from None
    except Exception as exc:  # noqa: BLE001 - the schema converter fails on odd schemas in many ways
        listed = ", ".join(f'"{name}"' for name in shaped.names)
        raise ShapeRefused(BadShape(ShapePart.TOOLS, f"the parameters of {listed} cannot be turned into a grammar "
                                                     f"({exc or type(exc).__name__})")) from None


def refuse_unbounded(grammar: str, part: ShapePart) -> None:
    """ShapeRefused when a grammar, whoever made it, is past what llama.cpp can hold
    (app/engine/backends/llama/gbnf_bounds.py): to be called before llama.cpp parses it, since its
    parser and sampler recurse on deep grammars until the engine dies."""
    why = grammar_problem(grammar)
    if why is not None:
        raise ShapeRefused(BadShape(part, why))


def arguments_grammar(tools: Sequence[Mapping[str, Any]], only: str | None = None,
                      key: str = "arguments") -> str:
    """GBNF for the family-neutral JSON call object {"name": one of the tools, "arguments": per its
    schema}: an alternation over the tools (or just the one named `only`), built with
    llama_cpp.llama_grammar.json_schema_to_gbnf, so "name" comes first and the arguments follow
    that tool's parameters schema. key: what the family calls the arguments (Llama 3: "parameters").
    GrammarTooBig, before anything is converted, when a tool's parameters are past what llama.cpp's
    grammars can hold (app/engine/grammar_bounds.py), or after, when the grammar is."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf  # loads llama.cpp: only when asked

    options: list[dict[str, Any]] = []
    definitions: dict[str, Any] = {}
    walk = SchemaWalk()  # the tools share one grammar, and so its bounds
    for number, tool in enumerate(tools):
        function = tool.get("function", tool)
        if only is not None and function["name"] != only:
            continue
        given = function.get("parameters") or {"type": "object"}
        problem = walk.problem(given)
        if problem is not None:
            raise GrammarTooBig(f'the parameters of the tool "{function["name"]}": {problem.words()}')
        parameters = _hoist_definitions(dict(given), f"t{number}-", definitions)
        options.append({"type": "object", "properties": {"name": {"const": function["name"]}, key: parameters},
                        "required": ["name", key], "additionalProperties": False})
    if not options:
        raise ValueError(f"no tool named {only!r} among the tools given" if only else "no tools given")
    schema: dict[str, Any] = options[0] if len(options) == 1 else {"oneOf": options}
    if definitions:
        schema = {**schema, "$defs": definitions}
    grammar = str(json_schema_to_gbnf(json.dumps(schema), prop_order=["name", key]))
    why = grammar_problem(grammar)
    if why is not None:
        raise GrammarTooBig(f"the grammar of the tools' calls: {why}")
    return grammar


def _hoist_definitions(schema: dict[str, Any], prefix: str, into: dict[str, Any]) -> dict[str, Any]:
    """Moves a tool's own $defs/definitions to the top, renamed, so its $refs still resolve there."""
    names = {}
    for key in ("$defs", "definitions"):
        for name, definition in (schema.pop(key, None) or {}).items():
            names[f"#/{key}/{name}"] = f"#/$defs/{prefix}{name}"
            into[f"{prefix}{name}"] = definition

    def rename(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: names.get(v, v) if k == "$ref" and isinstance(v, str) else rename(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rename(item) for item in value]
        return value

    for name in list(into):
        if name.startswith(prefix):
            into[name] = rename(into[name])
    return dict(rename(schema))
