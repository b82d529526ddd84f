"""What must follow a tool call the model has opened, per family: the lazy grammar's root rule.

Once a model opens a call (app/engine/tool_calls/tool_calls.ToolCallReader.open_call), the rest of it is
generated under a grammar made from the tools' JSON schemas (app/engine/backends/llama/lazy_grammar.py), so
a small model cannot write arguments that do not parse. This module says, for the text of
the open call so far, what that rest is, as the body of a GBNF root rule that may use:

- `call`: one call object of any tool given, {"name": ..., KEY: {...}} ("name" first), KEY
  being "arguments" ("parameters" for Llama 3);
- `args`: the arguments object of the one tool already named;
- `ws`: up to two spaces, tabs or newlines.

Two points where a call can be held: at its opening marker, when the marker always opens a
call (Hermes/Qwen `<tool_call>`, Llama 3 `<|python_tag|>`, Mistral `[TOOL_CALLS][`, Phi-4
`<|tool_call|>`): all of the call follows `call`; and once the model has written the name
of one of the tools (`{"name": "get_time"` in a call that opened as bare JSON or a ```json
fence, which may also be ordinary JSON until then; Mistral's `[TOOL_CALLS]NAME[ARGS]`;
gpt-oss's `to=functions.NAME ...<|message|>`): its arguments follow `args`.

Families where no grammar applies stay unconstrained: Gemma's `call:NAME{key:<escape>v<escape>}`
is not JSON, and llama.cpp's JSON-schema converter only writes JSON. A call first seen
further on than these points (the model's tokens ran past the marker in one piece, or the
arguments come before the name) is not held either: a grammar cannot start inside text
already written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Collection


@dataclass(frozen=True)
class CallRest:
    """What must follow an open call: the body of the grammar's root rule (see the module
    docstring for the rules it uses), the tool whose arguments `args` stands for, and the
    key the family writes the arguments under."""

    root: str
    tool: str | None = None
    key: str = "arguments"


class Undecided(Enum):
    """The call's text does not yet say whether a grammar applies: the reader goes on."""

    WAIT = "wait"


WAIT = Undecided.WAIT
Decision = CallRest | Undecided | None  # None: no grammar for this call


def call_rest(family: str, text: str, names: Collection[str]) -> Decision:
    """What must follow `text`, an open call of the family (ToolFamily's value) written so far,
    when the tools given are `names`."""
    for opener, rest in _OPENERS.get(family, ()):
        if text.startswith(opener):
            return rest(text[len(opener):], frozenset(names))
    return None


def held(family: str) -> bool:
    """Whether calls of the family can be held to a grammar at all (Gemma's cannot)."""
    return family in _OPENERS


_LIST_OF_CALLS = '"[" ws call (ws "," ws call)* ws "]"'


def _literal(text: str) -> str:
    """A GBNF string literal matching exactly text."""
    return json.dumps(text, ensure_ascii=False)


def _named(body: str, names: frozenset[str], close: str, key: str = "arguments") -> Decision:
    """After `{"name": "TOOL"` (body is the JSON written so far): the arguments of TOOL, under
    key, then the object's `}` and the family's close."""
    match = re.match(r'\s*\{\s*"name"\s*:\s*"([^"\\]*)"', body)
    if match is None:
        return WAIT if _may_name(body, names) else None
    if match.group(1) not in names:
        return None
    after = _after_name(body[match.end():], (",", f'"{key}"', ":"))
    if after is None:
        return None
    return CallRest(f'{after} ws args ws "}}"{close}', tool=match.group(1), key=key)


def _may_name(body: str, names: frozenset[str]) -> bool:
    """Whether body can still become `{"name": "TOOL"` for one of the tools."""
    compact = re.sub(r"\s+", "", body)
    lead = '{"name":"'
    if len(compact) <= len(lead):
        return lead.startswith(compact)
    return compact.startswith(lead) and any(name.startswith(compact[len(lead):]) for name in names)


def _after_name(after: str, pieces: tuple[str, ...]) -> str | None:
    """GBNF for what is left of pieces (whitespace allowed between them) once `after` is
    written; None when after is not their beginning (or has gone past them)."""
    at = 0
    left: list[str] = []
    for piece in pieces:
        start = len(after) - len(after[at:].lstrip())
        written = after[start:]
        if not written:
            left.append(f"ws {_literal(piece)}")
            at = start
        elif written.startswith(piece):
            at = start + len(piece)
        elif piece.startswith(written):
            left.append(_literal(piece[len(written):]))
            at = len(after)
        else:
            return None
    return None if after[at:].strip() else " ".join(left)


def _hermes_tag(body: str, names: frozenset[str]) -> Decision:
    close = ' ws "</tool_call>"'
    if not body.strip():
        return CallRest(f"ws call{close}")
    return _named(body, names, close)


def _fence(body: str, names: frozenset[str]) -> Decision:
    return _named(body, names, ' ws "```"') if body.strip() else WAIT


def _bare(body: str, names: frozenset[str]) -> Decision:
    return _named("{" + body, names, "")


def _bare_llama3(body: str, names: frozenset[str]) -> Decision:
    return _named("{" + body, names, "", key="parameters")


def _python_tag(body: str, names: frozenset[str]) -> Decision:
    if not body.strip():
        return CallRest("ws call", key="parameters")
    return _named(body, names, "", key="parameters")


_MISTRAL_NAME = re.compile(r"\s*([^\s\[\]{}]+)(?:\[CALL_ID\][^\s\[]*)?\[ARGS\]\s*")


def _mistral(body: str, names: frozenset[str]) -> Decision:
    """`[TOOL_CALLS][{...}, ...]` (Nemo, Small 3.1) or `[TOOL_CALLS]NAME[ARGS]{...}` (Small 3.2)."""
    written = body.lstrip()
    if written.startswith("["):
        return CallRest('ws call (ws "," ws call)* ws "]"') if not written[1:].strip() else None
    match = _MISTRAL_NAME.fullmatch(body)
    if match is not None:
        return CallRest("args", tool=match.group(1)) if match.group(1) in names else None
    may_be = len(body) < 200 and re.fullmatch(r"\s*[^\s\[\]{}]*(\[[A-Z_]*\]?[^\s\[]*)*", body) is not None
    return WAIT if may_be else None


def _phi4(body: str, names: frozenset[str]) -> Decision:
    close = ' (ws "<|/tool_call|>")?'  # Granite 3.3 writes no closing tag
    if not body.strip():
        return CallRest(f"ws (call | {_LIST_OF_CALLS}){close}")
    return _named(body, names, close)


_RECIPIENT = re.compile(r"to=functions\.([^\s<]+)")


def _harmony(body: str, names: frozenset[str]) -> Decision:
    """The arguments once the header names a function and opens the message. `<|call|>` is an
    end-of-generation token in llama.cpp's gpt-oss vocabulary, allowed once `args` is complete."""
    header_end = body.find("<|message|>")
    if header_end < 0:
        return WAIT if len(body) < 300 else None
    recipient = _RECIPIENT.search(body, 0, header_end)
    if recipient is None or recipient.group(1) not in names or body[header_end + len("<|message|>"):].strip():
        return None
    return CallRest('args (ws "<|call|>")?', tool=recipient.group(1))


_Rest = Callable[[str, frozenset[str]], Decision]
_OPENERS: dict[str, tuple[tuple[str, _Rest], ...]] = {
    "hermes": (("<tool_call>", _hermes_tag), ("```json", _fence), ("{", _bare)),
    "llama3": (("<|python_tag|>", _python_tag), ("{", _bare_llama3)),
    "mistral": (("[TOOL_CALLS]", _mistral),),
    "phi4": (("<|tool_call|>", _phi4),),
    "gpt_oss": (("<|start|>", _harmony), ("<|channel|>", _harmony)),
}
