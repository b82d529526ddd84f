"""A request's JSON schemas (response_format, text.format, a tool's parameters) held to what Kestrel's
grammars can hold, before the engine sees them.

The schema goes to the engine as it came (AnswerShape.json_schema) and the backend that runs the
model builds what it follows (llama.cpp's GBNF in app/engine/backends/llama/grammar.py, ONNX Runtime
GenAI's guidance), so this module loads no runtime and converts nothing. What it does is tell the
client, in a 400 naming the field, the keyword and where, what no backend could be handed: a schema
past the bounds of app/engine/grammar_bounds.py, or a $ref to nothing inside it. The routes read a
request on a worker thread (openai_asks.read_off_loop): a 32 MB schema is walked off the server's loop.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from app.engine.grammar_bounds import SchemaWalk, TooBig, schema_problem
from app.server.errors import BadRequest


def answer_schema(schema: Any, param: str) -> str:
    """The schema as JSON text for AnswerShape.json_schema, or BadRequest naming param (and, for a
    schema past a bound, the keyword and where it is)."""
    if not isinstance(schema, dict):
        raise BadRequest(f"{param} must be a JSON schema object.", param)
    problem = schema_problem(schema)
    if problem is not None:
        raise too_big(problem, param)
    dangling = _dangling_ref(schema)
    if dangling is not None:
        ref, where = dangling
        raise BadRequest(f"{param}: $ref {ref!r} at {where} points to nothing in the schema. Kestrel follows $ref "
                         "within the schema only (\"#/$defs/name\"): fix it and ask again.", param)
    return json.dumps(schema)


def refuse_tool_schemas(tools: Sequence[tuple[str, Any, str]], choice: str) -> None:
    """BadRequest for the first tool (its name, parameters, and the param that names them) whose
    parameters are too deep or big to pass on at all, or past what a grammar can hold when the
    answer is held to a call of it (tool_choice "required" or its name): the held tools share one
    grammar. A call that the lazy grammar of tool_choice "auto" cannot hold stays free instead
    (app/engine/backends/llama/lazy_grammar.py)."""
    held = SchemaWalk()
    for name, schema, param in tools:
        is_held = choice in ("required", name)
        problem = (held if is_held else SchemaWalk()).problem(schema)
        if problem is not None and (is_held or problem.keyword in ("nesting", "size")):
            raise too_big(problem, param)


def too_big(problem: TooBig, param: str) -> BadRequest:
    return BadRequest(f"{param}: {problem.words()}. {_ADVICE.get(problem.keyword, _LOWER)}", param)


_LOWER = "Lower it, or leave it out and check that part of the answer yourself, and ask again."
_ADVICE = {
    "nesting": "Make the schema shallower and ask again.",
    "size": "Send a smaller schema.",
    "grammar": "Make the schema smaller (fewer properties, smaller maxLength, maxItems and enums) and ask again.",
    "enum": "Use fewer values (or a string with a pattern) and ask again.",
    "properties": "Split the object into smaller ones and ask again.",
}
_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")


def _dangling_ref(schema: dict[str, Any]) -> tuple[str, str] | None:
    """The first $ref (and where it is) that does not lead to a part of this schema, as JSON schema
    converters resolve one ("#", "#/a/b"); walked with a stack of its own, like the bounds."""
    stack: list[tuple[Any, str]] = [(schema, "$")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, list):
            stack.extend((item, f"{path}[{index}]") for index, item in enumerate(value))
        elif isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str) and not _resolves(schema, ref):
                return ref, path
            stack.extend((item, f"{path}.{key}" if _NAME.fullmatch(str(key)) else f"{path}[{str(key)!r}]")
                         for key, item in value.items())
    return None


def _resolves(schema: dict[str, Any], ref: str) -> bool:
    if ref != "#" and not ref.startswith("#/"):
        return False  # another document (never fetched), or an anchor
    target: Any = schema
    for step in ref[2:].split("/") if ref != "#" else ():
        if not isinstance(target, dict) or step not in target:
            return False
        target = target[step]
    return True
