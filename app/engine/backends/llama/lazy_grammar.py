"""The lazy tool-call grammar: free text until the model opens a call, the tools' schemas inside it.

With tool_choice "auto" a model may answer in words, call tools, or both. Holding the whole
answer to a grammar would take the words away, so the grammar is lazy: the answer's reader
(app/engine/answers/answer_common._read_calls) tells a LazyCallGrammar what it has read after each
piece, and when a call has opened (ToolCallReader.open_call) and its family says what must
follow (app/engine/backends/llama/tool_call_rest.py), the backend's token loop switches to that grammar
before the next token; when the call closes, sampling is free again, so the model may write
more text, open another call, or end.

llama-cpp-python 0.3.36 builds its sampler chain (grammar included) once per
`Llama.generate`, so a switch ends that generate and starts another on the prompt and the
tokens so far: its prefix match keeps the whole KV cache and evaluates only the last token,
the one the old generate had yielded but not yet evaluated (the same work as going on;
benchmarks/tools.py measures it). The new sampler chain starts the repeat-penalty window
afresh. ONNX Runtime GenAI 0.18 sets guidance per generator and a new generator evaluates
the whole prompt again, so the ONNX backend leaves calls unconstrained
(app/engine/backends/onnx/onnx_backend.py).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from app.engine.answers.answer_shape import ShapedAnswer
from app.engine.backends.llama.gbnf_bounds import grammar_problem
from app.engine.backends.llama.grammar import arguments_grammar
from app.engine.grammar_bounds import GrammarTooBig, schema_problem
from app.engine.backends.llama.tool_call_rest import CallRest, Undecided, call_rest, held
from app.engine.tool_calls.tool_calls import ToolCallReader, ToolFamily

Tool = Mapping[str, Any]

# "0" turns the lazy grammar off in the engine process (benchmarks/tools.py compares both).
SWITCH_VARIABLE = "KESTREL_LAZY_TOOL_GRAMMAR"


@dataclass(frozen=True)
class Switch:
    """Sample the next tokens under this GBNF grammar (None: freely)."""

    grammar: str | None


class LazyCallGrammar:
    """One answer's lazy grammar: observes its reader, hands the backend a Switch when needed.

    usable(grammar) says whether the backend's grammar engine reads a grammar (llama.cpp
    parses it); one it cannot read (a schema feature the converter gets wrong) leaves that
    call unconstrained rather than failing the answer. So does a schema or grammar past what
    llama.cpp can hold (app/engine/grammar_bounds.py), found before llama.cpp is handed it.
    """

    def __init__(self, family: ToolFamily, tools: Sequence[Tool], usable: Callable[[str], bool]) -> None:
        self._family = family
        self._tools = tuple(tools)
        self._names = frozenset(str(tool["function"]["name"]) for tool in tools)
        self._usable = usable
        self._active = False
        self._decided = 0  # the number of the last call block a decision was made for
        self._pending: Switch | None = None
        self.switches = 0  # how many times the grammar was switched on (tests, benchmarks)

    def observe(self, reader: ToolCallReader) -> None:
        """After the reader has read a piece: a call that opened gets its grammar, one that
        closed lets sampling go free."""
        opened = reader.open_call()
        if self._active:
            if opened is None or opened.number != self._decided:
                self._active = False
                self._pending = Switch(None)
            return
        if opened is None or opened.number == self._decided:
            return
        decision = call_rest(self._family.value, opened.text, self._names)
        if isinstance(decision, Undecided):
            return
        self._decided = opened.number
        grammar = None if decision is None else self._grammar(decision)
        if grammar is not None:
            self._active = True
            self._pending = Switch(grammar)
            self.switches += 1

    def take(self) -> Switch | None:
        """The switch to make before the next token, once (None: go on as before)."""
        pending, self._pending = self._pending, None
        return pending

    def _grammar(self, rest: CallRest) -> str | None:
        try:
            text = rest_grammar(rest, self._tools)
        except Exception:  # noqa: BLE001 - the schema converter fails on odd schemas in many ways
            return None
        return text if self._usable(text) else None


def lazy_grammar_for(shaped: ShapedAnswer, usable: Callable[[str], bool]) -> LazyCallGrammar | None:
    """The answer's lazy grammar: for tool_choice "auto" in a family whose calls can be held
    (a forced call is held whole already); None when there is none, or it is switched off
    (SWITCH_VARIABLE "0" in the engine's environment)."""
    if shaped.family is None or shaped.forced or not shaped.tools or not held(shaped.family.value):
        return None
    if os.environ.get(SWITCH_VARIABLE, "1") == "0":
        return None
    return LazyCallGrammar(shaped.family, shaped.tools, usable)


def rest_grammar(rest: CallRest, tools: Sequence[Tool]) -> str:
    """The GBNF grammar for the rest of a call: rest.root with the rules it uses. GrammarTooBig
    when a schema it needs, or the grammar, is past what llama.cpp can hold."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf  # loads llama.cpp: only when asked

    lines = [f"root ::= {rest.root}", "ws ::= [ \\t\\n]{0,2}"]
    if re.search(r"\bcall\b", rest.root):
        lines += _renamed(arguments_grammar(tools, key=rest.key), "call-", "call")
    if rest.tool is not None:
        function = next(tool["function"] for tool in tools if tool["function"]["name"] == rest.tool)
        schema = function.get("parameters") or {"type": "object"}
        problem = schema_problem(schema)
        if problem is not None:
            raise GrammarTooBig(f"the parameters of the tool \"{rest.tool}\": {problem.words()}")
        lines += _renamed(json_schema_to_gbnf(json.dumps(schema)), "args-", "args")
    text = "\n".join(lines) + "\n"
    why = grammar_problem(text)
    if why is not None:
        raise GrammarTooBig(why)
    return text


_RULE = re.compile(r"^([A-Za-z0-9-]+)\s*::=(.*)$")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]*")


def _renamed(grammar: str, prefix: str, root: str) -> list[str]:
    """The grammar's rules with every rule name prefixed (so two grammars' rules never meet)
    and its root named `root`; string literals and character classes are left alone."""
    rules = [match.groups() for line in grammar.splitlines() if (match := _RULE.match(line.strip()))]
    names = {name for name, _ in rules}
    renamed = {name: (root if name == "root" else prefix + name) for name in names}
    return [f"{renamed[name]} ::={_rename_body(body, renamed)}" for name, body in rules]


def _rename_body(body: str, renamed: dict[str, str]) -> str:
    out: list[str] = []
    at = 0
    while at < len(body):
        char = body[at]
        if char in "\"[":
            end = _literal_end(body, at)
            out.append(body[at:end])
            at = end
        elif (match := _NAME.match(body, at)) is not None:
            out.append(renamed.get(match.group(), match.group()))
            at = match.end()
        else:
            out.append(char)
            at += 1
    return "".join(out)


def _literal_end(body: str, start: int) -> int:
    """Index just past the "string" or [class] that opens at body[start] (backslash escapes)."""
    close = '"' if body[start] == '"' else "]"
    at = start + 1
    while at < len(body) and body[at] != close:
        at += 2 if body[at] == "\\" else 1
    return at + 1
