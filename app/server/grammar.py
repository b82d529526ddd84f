"""JSON grammars for `response_format`: any JSON object, or one that follows a JSON schema.

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
from pathlib import Path
from types import ModuleType
from typing import Any

from app.server.errors import BadRequest

_MODULE = "kestrel_llama_grammar"


@functools.cache
def _converter() -> ModuleType:
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
    """GBNF for JSON that validates against schema, or BadRequest naming param."""
    if not isinstance(schema, dict):
        raise BadRequest(f"{param} must be a JSON schema object.", param)
    try:
        grammar: str = _converter().json_schema_to_gbnf(json.dumps(schema))
    except (ValueError, KeyError, TypeError, RecursionError, NotImplementedError, AssertionError) as exc:
        raise BadRequest(f"{param} could not be turned into a grammar: {exc or type(exc).__name__}. Kestrel "
                         "supports the JSON schema subset of llama.cpp (types, properties, required, enum, "
                         "arrays, $ref within the schema).", param) from None
    return grammar
