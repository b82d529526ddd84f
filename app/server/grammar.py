"""JSON grammars for `response_format`: any JSON object, or one that follows a JSON schema.

A schema is checked against what llama.cpp's grammars can hold (app/engine/grammar_bounds.py)
before anything is converted, and the grammar made of it again before it goes to the engine: a
schema past a bound is a 400 that names the keyword and where it is. The routes read a request
on a worker thread (openai_asks.read_off_loop), so a conversion never holds the server's loop.

llama-cpp-python's converter (llama_cpp/llama_grammar.py, pure Python) makes the GBNF that
the engine hands to llama.cpp. Importing it as `llama_cpp.llama_grammar` would run the
package's __init__, which loads llama.cpp's native libraries into this process: the very
thing the engine's own process exists to keep out of the window. So the file is loaded by
itself; only where it is not a file on disk (a frozen build without the source) does the
package import run.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

from app.engine.backends.llama.gbnf_bounds import grammar_problem
from app.engine.grammar_bounds import SchemaWalk, TooBig, schema_problem
from app.server.errors import BadRequest

_MODULE = "kestrel_llama_grammar"
_LOADING = threading.Lock()  # requests are read on worker threads: the module is loaded once


def _converter() -> ModuleType:
    with _LOADING:
        return _loaded()


@functools.cache
def _loaded() -> ModuleType:
    spec = importlib.util.find_spec("llama_cpp")  # finds the package without running its __init__
    if spec is not None and spec.origin:
        source = Path(spec.origin).with_name("llama_grammar.py")
        if source.is_file():
            loading = importlib.util.spec_from_file_location(_MODULE, source)
            if loading is not None and loading.loader is not None:
                module = importlib.util.module_from_spec(loading)
                sys.modules[_MODULE] = module
                loading.loader.exec_module(module)
                return module
    import llama_cpp.llama_grammar as packaged

    return packaged


def any_json_object() -> str:
    """GBNF for one JSON object (response_format json_object)."""
    text: str = _converter().JSON_GBNF
    return text


def json_schema_grammar(schema: Any, param: str) -> str:
    """GBNF for JSON that validates against schema, or BadRequest naming param (and, for a schema
    past a bound, the keyword and where it is)."""
    if not isinstance(schema, dict):
        raise BadRequest(f"{param} must be a JSON schema object.", param)
    problem = schema_problem(schema)
    if problem is not None:
        raise too_big(problem, param)
    try:
        grammar: str = _converter().json_schema_to_gbnf(json.dumps(schema))
    except (ValueError, KeyError, TypeError, RecursionError, NotImplementedError, AssertionError) as exc:
        raise BadRequest(f"{param} could not be turned into a grammar: {exc or type(exc).__name__}. Kestrel "
                         "supports the JSON schema subset of llama.cpp (types, properties, required, enum, "
                         "arrays, $ref within the schema).", param) from None
    why = grammar_problem(grammar)
    if why is not None:
        raise BadRequest(f"{param}: {why}. Make the schema smaller (fewer properties, smaller maxLength, "
                         "maxItems and enums) and ask again.", param)
    return grammar


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
