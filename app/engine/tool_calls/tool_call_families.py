"""How each chat-template family writes a tool call: its markers, and reading one call block."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable

from app.engine.tool_calls.gemma_values import GemmaValues, skip_space


class Problem(Enum):
    """Why a block that began like a tool call is given back as text."""

    NOT_A_CALL = "not_a_call"  # ordinary text after all (bare JSON, a fenced code block): no note
    INVALID = "invalid"  # a call whose content does not parse
    CUT_OFF = "cut_off"  # the answer ended inside the call


@dataclass(frozen=True)
class RawCall:
    """A call as read from the model's text, before it is checked against the tools."""

    name: str
    arguments: Any  # a JSON object (dict) when the call is good


@dataclass(frozen=True)
class Block:
    """One call block read from the text: where it ends, and its calls or why there are none."""

    end: int
    calls: tuple[RawCall, ...] = ()
    problem: Problem | None = None


# Reads the block at the start of `text` (which begins with one of the syntax's openers);
# None: the block may still go on, so more text is needed (never None when final).
BlockReader = Callable[[str, bool], "Block | None"]


@dataclass(frozen=True)
class CallSyntax:
    """What opens a call in one family and how a block that opens so is read."""

    openers: tuple[str, ...]
    read: BlockReader
    bare_json: bool = False  # an answer that starts with `{` may be a call written as bare JSON


def json_end(text: str, start: int) -> int | None:
    """Index just past the JSON object or array that opens at text[start]; None while it is open.

    Counts brackets outside strings only, so it finds where a value ends without parsing it
    (json.loads then says whether it is valid).
    """
    depth = 0
    in_string = escaped = False
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def call_of(value: Any) -> RawCall | None:
    """A call from the JSON object a model wrote, in any of the shapes the families use.

    {"name", "arguments"} (Hermes, Mistral, Phi-4), {"name", "parameters"} (Llama 3), and
    the OpenAI shape {"type": "function", "function": {...}}; arguments may be an object or
    a string holding one, and are absent for a tool that takes nothing.
    """
    if isinstance(value, dict) and isinstance(value.get("function"), dict):
        value = value["function"]
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return RawCall(value["name"], None)
    return RawCall(value["name"], arguments)


def _loads(text: str) -> Any:
    """The JSON value, or None for text that is not JSON (JSON's null is no call either)."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def _json_block(body: str, end: int) -> Block:
    """The calls in a JSON body (an object or a list of them) that ended at `end`, or its problem."""
    value = _loads(body)
    calls = [call_of(item) for item in (value if isinstance(value, list) else [value])]
    if not calls or None in calls:
        return Block(end, problem=Problem.INVALID)
    return Block(end, tuple(call for call in calls if call))


def _first_opener(openers: tuple[str, ...], text: str) -> str:
    return next(opener for opener in openers if text.startswith(opener))


# --- Hermes / Qwen 2.5 & 3 ---------------------------------------------------------------

_FENCE = "```json"


def _read_hermes(text: str, final: bool) -> Block | None:
    if text.startswith("<tool_call>"):
        # The tag written as a word ("wrap calls in <tool_call> tags") opens no call object.
        body = text[len("<tool_call>"):].lstrip()
        if not body and not final:
            return None
        if not body.startswith("{"):
            return Block(len("<tool_call>"), problem=Problem.NOT_A_CALL)
        stop = text.find("</tool_call>")
        if stop < 0:
            return Block(len(text), problem=Problem.CUT_OFF) if final else None
        return _json_block(text[len("<tool_call>"):stop], stop + len("</tool_call>"))
    if text.startswith(_FENCE):
        return _read_fenced(text, final)
    return read_bare_json(text, final)


def _read_hermes_doubled(text: str, final: bool) -> Block | None:
    """Hermes calls, and the same call object inside doubled braces, `{{"name": ..., "arguments":
    {...}}}`, bare or between the tags: the form Qwen2.5's own template shows its models (its tool
    instructions print `{{"name": <function-name>, ...}}` literally), which they copy, most often
    as the answer after a tool's result. Only for templates that teach it (teaches_doubled_braces)."""
    if text.startswith("{{"):
        return _doubled_object(text, 0, final)
    if text.startswith("<tool_call>"):
        start = skip_space(text, len("<tool_call>"))
        if text.startswith("{{", start):
            stop = text.find("</tool_call>", start)
            if stop < 0:
                return Block(len(text), problem=Problem.CUT_OFF) if final else None
            inner = _undoubled(text[start:stop].strip())
            end = stop + len("</tool_call>")
            return _json_block(inner, end) if inner is not None else Block(end, problem=Problem.INVALID)
    return _read_hermes(text, final)


def _doubled_object(text: str, start: int, final: bool) -> Block | None:
    """The call in `{{...}}` opening at text[start], once its last brace is written; text (the
    first `{`, read on as any text) when it is not a call object in doubled braces."""
    if not _may_be_call_object(text[start + 1:], final):
        return Block(start + 1, problem=Problem.NOT_A_CALL)
    end = json_end(text, start + 1)
    if end is None:
        return Block(len(text), problem=Problem.CUT_OFF) if final else None
    close = skip_space(text, end)
    if close == len(text) and not final:
        return None  # the closing `}` may still come
    if not text.startswith("}", close):
        return Block(start + 1, problem=Problem.NOT_A_CALL)
    call = written_call(_loads(text[start + 1:end]))
    return Block(close + 1, (call,)) if call else Block(close + 1, problem=Problem.NOT_A_CALL)


def _undoubled(body: str) -> str | None:
    """`{{...}}` without its outer braces; None when it is not so wrapped."""
    return body[1:-1] if body.startswith("{{") and body.endswith("}}") else None


def _read_fenced(text: str, final: bool) -> Block | None:
    """A ```json fenced block holding a call object (small Qwen models write calls so); else text."""
    start = skip_space(text, len(_FENCE))
    if start == len(text):
        return Block(len(text), problem=Problem.NOT_A_CALL) if final else None
    if text[start] != "{" or not _may_be_call_object(text[start:], final):
        return Block(start, problem=Problem.NOT_A_CALL)
    end = json_end(text, start)
    close = -1 if end is None else text.find("```", end)
    if end is None or close < 0:
        if final:
            return Block(len(text), problem=Problem.CUT_OFF)
        return None
    if text[end:close].strip():
        return Block(close + 3, problem=Problem.NOT_A_CALL)
    call = written_call(_loads(text[start:end]))
    return Block(close + 3, (call,)) if call else Block(close + 3, problem=Problem.NOT_A_CALL)


_FIRST_KEY = re.compile(r'\{\s*"((?:[^"\\]|\\.)*)"\s*:')
_CALL_KEYS = ("name", "type", "function")


def _may_be_call_object(text: str, final: bool) -> bool:
    """Whether text (starting with `{`) can still be a call object: its first key names one."""
    match = _FIRST_KEY.match(text)
    if match:
        return match.group(1) in _CALL_KEYS
    # Until the first key is complete, it may still be one (unless something else came first).
    return not final and re.fullmatch(r'\{\s*("(?:[^"\\]|\\.)*\\?"?\s*)?', text) is not None


def read_bare_json(text: str, final: bool) -> Block | None:
    """An answer written as one JSON call object (Llama 3's way; Qwen's when it forgets the tags).

    It counts as a call only when it parses as one; JSON that is not a call stays text.
    """
    if not _may_be_call_object(text, final):
        return Block(1, problem=Problem.NOT_A_CALL)  # the `{`; what follows is read as any text
    end = json_end(text, 0)
    if end is None:
        return Block(len(text), problem=Problem.CUT_OFF) if final else None
    value = _loads(text[:end])
    if value is None:
        return Block(end, problem=Problem.INVALID)
    call = written_call(value)
    return Block(end, (call,)) if call else Block(end, problem=Problem.NOT_A_CALL)


def written_call(value: Any) -> RawCall | None:
    """A call from JSON that is not inside call markers: it must name its arguments to count."""
    keys = ("arguments", "parameters", "function")
    if isinstance(value, dict) and any(key in value for key in keys):
        return call_of(value)
    return None


# --- Llama 3.1+ ----------------------------------------------------------------------------

_PYTHON_TAG = "<|python_tag|>"


def _read_llama3(text: str, final: bool) -> Block | None:
    """`<|python_tag|>` then a JSON call; more may follow, separated by `;` (read as bare JSON)."""
    if not text.startswith(_PYTHON_TAG):
        return read_bare_json(text, final)
    start = skip_space(text, len(_PYTHON_TAG))
    if text[start:start + 1] in ("[", "{"):
        return _json_value_block(text, start, final)
    # Not JSON (a built-in tool's `name.call(...)`): it runs to the end of the answer.
    return Block(len(text), problem=Problem.INVALID) if final else None


# --- Mistral -------------------------------------------------------------------------------

_TOOL_CALLS = "[TOOL_CALLS]"
_NAME_FORM = re.compile(r"([^\s\[\]{}]+)(?:\[CALL_ID\][^\s\[]*)?\[ARGS\]")


def _read_mistral(text: str, final: bool) -> Block | None:
    """`[TOOL_CALLS][{...}, ...]` (Nemo, Small 3.1) or `[TOOL_CALLS]name[ARGS]{...}` (Small 3.2, Devstral)."""
    start = skip_space(text, len(_TOOL_CALLS))
    if start < len(text) and text[start] in "[{":
        return _json_value_block(text, start, final)
    match = _NAME_FORM.match(text, start)
    if match is None:  # [TOOL_CALLS] is a control token: the rest of the answer is the call
        if not final:
            return None
        broken = re.search(r"[\s{]", text[start:]) is not None  # no name goes on so
        return Block(len(text), problem=Problem.INVALID if broken else Problem.CUT_OFF)
    start = skip_space(text, match.end())
    if start < len(text) and text[start] != "{":
        return Block(start, problem=Problem.INVALID)
    end = json_end(text, start) if start < len(text) else None
    if end is None:
        return Block(len(text), problem=Problem.CUT_OFF) if final else None
    arguments = _loads(text[start:end])
    if not isinstance(arguments, dict):
        return Block(end, problem=Problem.INVALID)
    return Block(end, (RawCall(match.group(1), arguments),))


def _json_value_block(text: str, start: int, final: bool) -> Block | None:
    """The JSON calls that open at text[start] (an object or a list), once the value has ended."""
    end = json_end(text, start) if start < len(text) else None
    if end is None:
        return Block(len(text), problem=Problem.CUT_OFF) if final else None
    return _json_block(text[start:end], end)


# --- Phi-4-mini (and Granite 3.3, which leaves the closing tag out) ------------------------

_PHI_OPEN, _PHI_CLOSE = "<|tool_call|>", "<|/tool_call|>"


def _read_phi4(text: str, final: bool) -> Block | None:
    """`<|tool_call|>` then a JSON call object or list, then `<|/tool_call|>` if the model writes it
    (Granite 3.3 does not: its block ends with the JSON value)."""
    close = text.find(_PHI_CLOSE, len(_PHI_OPEN))
    start = skip_space(text, len(_PHI_OPEN))
    end = json_end(text[:close] if close >= 0 else text, start) if text[start:start + 1] in ("[", "{") else None
    if end is None:
        if close >= 0:
            return Block(close + len(_PHI_CLOSE), problem=Problem.INVALID)
        return Block(len(text), problem=Problem.CUT_OFF) if final else None
    after = text[end:].lstrip()
    if not final and len(after) < len(_PHI_CLOSE) and _PHI_CLOSE.startswith(after):
        return None  # the closing tag may still come
    stop = len(text) - len(after) + len(_PHI_CLOSE) if after.startswith(_PHI_CLOSE) else end
    return _json_block(text[start:end], stop)


# --- Gemma (FunctionGemma and Gemma 4: `call:name{key:<escape>value<escape>}`) ---------------

_GEMMA_MARKS = {"<start_function_call>": ("<end_function_call>", "<escape>"),
                "<|tool_call>": ("<tool_call|>", '<|"|>')}
_GEMMA_CALL = re.compile(r"\s*call:([^\s{]+)\s*(\{.*\})\s*", re.DOTALL)


def _read_gemma(text: str, final: bool) -> Block | None:
    opener = _first_opener(tuple(_GEMMA_MARKS), text)
    close, quote = _GEMMA_MARKS[opener]
    stop = text.find(close, len(opener))
    if stop < 0:
        return Block(len(text), problem=Problem.CUT_OFF) if final else None
    end = stop + len(close)
    match = _GEMMA_CALL.fullmatch(text, len(opener), stop)
    if match is None:
        return Block(end, problem=Problem.INVALID)
    try:
        arguments = GemmaValues(match.group(2), quote).read_all()
    except ValueError:
        return Block(end, problem=Problem.INVALID)
    return Block(end, (RawCall(match.group(1), arguments),))


_HARMONY_OPENERS = ("<|start|>", "<|channel|>")
_RECIPIENT = re.compile(r"to=functions\.([^\s<]+)")
_HEADER_LIMIT = 300  # a harmony header is a few tokens; one this long is not a header


def _read_harmony(text: str, final: bool) -> Block | None:
    """`<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>`.

    The recipient may also stand in the start header (`<|start|>assistant to=functions.NAME
    <|channel|>commentary json<|message|>`). A message to no function is left as it was.
    """
    header_end = text.find("<|message|>", 0, _HEADER_LIMIT)
    if header_end < 0:
        if final or len(text) >= _HEADER_LIMIT:
            return Block(len(_first_opener(_HARMONY_OPENERS, text)), problem=Problem.NOT_A_CALL)
        return None
    body_start = header_end + len("<|message|>")
    recipient = _RECIPIENT.search(text, 0, header_end)
    if recipient is None:
        return Block(body_start, problem=Problem.NOT_A_CALL)
    stop = text.find("<|call|>", body_start)
    if stop < 0 and not final:
        return None
    end = len(text) if stop < 0 else stop + len("<|call|>")
    arguments = _loads(text[body_start:len(text) if stop < 0 else stop])
    if arguments is None:
        return Block(end, problem=Problem.INVALID)
    return Block(end, (RawCall(recipient.group(1), arguments),))


SYNTAXES: dict[str, CallSyntax] = {
    "hermes": CallSyntax(("<tool_call>", _FENCE), _read_hermes, bare_json=True),
    "hermes_doubled": CallSyntax(("<tool_call>", _FENCE), _read_hermes_doubled, bare_json=True),
    "llama3": CallSyntax((_PYTHON_TAG,), _read_llama3, bare_json=True),
    "mistral": CallSyntax((_TOOL_CALLS,), _read_mistral),
    "phi4": CallSyntax((_PHI_OPEN,), _read_phi4),
    "gemma": CallSyntax(tuple(_GEMMA_MARKS), _read_gemma),
    "gpt_oss": CallSyntax(_HARMONY_OPENERS, _read_harmony),
}
