"""An answer's shape (protocol.AnswerShape) made ready for any backend: its tools, and how its calls are read."""

from __future__ import annotations

import json
import secrets
import string
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from app.engine.errors import ShapeRefused
from app.engine.failures import BadShape, NoToolUse, ShapePart
from app.engine.protocol import TOOL_CHOICES, AnswerShape, ToolCall
from app.engine.tool_calls.tool_calls import ToolCallReader, ToolFamily, family_of, teaches_doubled_braces

Tool = Mapping[str, Any]


@dataclass(frozen=True)
class ShapedAnswer:
    """What a backend does for one answer's shape.

    tools: for the chat template's `tools` (None: the template gets none). family: the
    format the model writes its calls in, when they are read out of its text. forced:
    tool_choice "required" or a function's name: the whole answer is one call object
    {"name": ..., "arguments": {...}}, which a backend holds it to its own way (call_schema, a
    JSON schema of it, for one that follows schemas; llama.cpp builds a grammar of the tools:
    app/engine/backends/llama/grammar.py), and read as that call rather than in the model's
    own format. names: the tools the answer may call; only: the one tool_choice names (None:
    any of them).
    """

    tools: tuple[Tool, ...] | None = None
    family: ToolFamily | None = None
    forced: bool = False
    names: tuple[str, ...] = ()
    only: str | None = None
    call_schema: str | None = None
    doubled_braces: bool = False  # the template shows calls in `{{...}}`: its models write them so too

    def reader(self) -> ToolCallReader | None:
        """A reader of the model's calls for one answer (None: its text is all text)."""
        if self.family is None or self.forced:
            return None
        return ToolCallReader(self.family, self.names, doubled_braces=self.doubled_braces)


PLAIN = ShapedAnswer()


def shape_answer(shape: AnswerShape, template: str | None, model_name: str) -> ShapedAnswer:
    """The tools and how their calls are held for this answer; ShapeRefused when the shape is
    wrong (tools that are not a list of functions, a tool_choice naming none of them) or
    the model cannot call tools (its template takes none: app/engine/tool_calls/tool_calls.family_of).

    tool_choice "none" gives the template no tools at all, so the model cannot call one;
    "required" and a function's name hold the answer to the neutral call object of the
    tools allowed (all of them, or the one named), which then comes back as one call.
    """
    if shape.tools is None:
        if shape.tool_choice not in TOOL_CHOICES:
            raise ShapeRefused(BadShape(ShapePart.TOOL_CHOICE, f'it names the tool "{shape.tool_choice}" but '
                                                               "the request gives no tools"))
        return PLAIN
    tools = _tools(shape.tools)
    names = tuple(str(tool["function"]["name"]) for tool in tools)
    if shape.tool_choice == "none":
        return PLAIN
    family = family_of(template)
    if family is None:
        raise ShapeRefused(NoToolUse(model_name))
    if shape.tool_choice == "auto":
        return ShapedAnswer(tools, family, names=names, doubled_braces=teaches_doubled_braces(template))
    allowed = tools if shape.tool_choice == "required" else tuple(
        tool for tool in tools if tool["function"]["name"] == shape.tool_choice)
    if not allowed:
        raise ShapeRefused(BadShape(ShapePart.TOOL_CHOICE, f'there is no tool named "{shape.tool_choice}" among '
                                                           f"the tools given ({', '.join(names)})"))
    if shape.grammar is not None or shape.json_schema is not None or shape.json_object:
        raise ShapeRefused(BadShape(ShapePart.GRAMMAR, "an answer held to a grammar or a JSON schema cannot also "
                                                       "be held to a tool call"))
    only = None if shape.tool_choice == "required" else shape.tool_choice
    names = tuple(str(t["function"]["name"]) for t in allowed)
    return ShapedAnswer(tools, family, forced=True, names=names, only=only,
                        call_schema=json.dumps(_call_schema(allowed)))


def _tools(text: str) -> tuple[Tool, ...]:
    """The tools as JSON objects; ShapeRefused saying what is wrong with them."""
    try:
        tools = json.loads(text)
    except ValueError as exc:
        raise ShapeRefused(BadShape(ShapePart.TOOLS, f"they are not JSON ({exc})")) from None
    if not isinstance(tools, list) or not tools:
        raise ShapeRefused(BadShape(ShapePart.TOOLS, "they must be a list of at least one function"))
    for number, tool in enumerate(tools, 1):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            raise ShapeRefused(BadShape(ShapePart.TOOLS, f'tool {number} is not {{"type": "function", "function": '
                                                         '{"name": ..., "parameters": {...}}}'))
    return tuple(tools)


def _call_schema(tools: Sequence[Tool]) -> dict[str, Any]:
    """The JSON schema of the neutral call object, as llama.cpp's call grammar holds it
    (app/engine/backends/llama/grammar.arguments_grammar)."""
    calls = [{"type": "object", "properties": {
        "name": {"const": tool["function"]["name"]},
        "arguments": tool["function"].get("parameters") or {"type": "object"}},
        "required": ["name", "arguments"], "additionalProperties": False} for tool in tools]
    return calls[0] if len(calls) == 1 else {"anyOf": calls}


def forced_call(text: str, names: Sequence[str]) -> ToolCall | None:
    """The call a forced answer wrote, or None when it is not one (cut short by its length)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("name") not in names or not isinstance(value.get("arguments"), dict):
        return None
    return ToolCall(0, new_call_id(), value["name"], json.dumps(value["arguments"], ensure_ascii=False,
                                                             separators=(",", ":")))


_ID_LETTERS = string.ascii_letters + string.digits


def new_call_id() -> str:
    """A call's id as OpenAI makes them: "call_" and 24 letters and digits."""
    return "call_" + "".join(secrets.choice(_ID_LETTERS) for _ in range(24))
