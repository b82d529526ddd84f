"""A turn's parts as JSON: one form for the history's column and the chat export, checked field by field."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.core.conversation import Part, TextPart, ToolCallPart, ToolResultPart

# Far above any real turn (8 rounds of a few calls each by default) and small enough that
# a hostile file cannot make one message into millions of objects.
MAX_PARTS = 10_000
# A call id, a server's or a tool's name: far above any real one (the engine's ids are 29
# characters, MCP's tool names up to 128); they are shown on one line.
MAX_NAME = 1_000
# How much of each result search finds (searchable_text says why not all).
SEARCHED_RESULT_CHARS = 4_000
_CONTROL = re.compile("[\x00-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class ToolRound:
    """One round of a turn that used tools: what the model wrote (its text and its calls),
    then the results it was given back. The last round of an answered turn has no calls."""

    text: str
    calls: tuple[ToolCallPart, ...]
    results: tuple[ToolResultPart, ...]


def tool_rounds(parts: Sequence[Part]) -> list[ToolRound]:
    """The rounds of a turn, in order: a round ends where the model writes again after results.

    Its text is the round's TextParts, joined as Message.text joins them. A call whose
    result is missing (the answer was stopped while it ran) stays in its round's calls.
    """
    rounds: list[ToolRound] = []
    texts: list[str] = []
    calls: list[ToolCallPart] = []
    results: list[ToolResultPart] = []
    for part in parts:
        if results and not isinstance(part, ToolResultPart):
            rounds.append(ToolRound(_joined(texts), tuple(calls), tuple(results)))
            texts, calls, results = [], [], []
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ToolCallPart):
            calls.append(part)
        else:
            results.append(part)
    if texts or calls or results:
        rounds.append(ToolRound(_joined(texts), tuple(calls), tuple(results)))
    return rounds


def _joined(texts: list[str]) -> str:
    return "\n\n".join(text for raw in texts if (text := raw.strip()))


def parts_to_data(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """The parts as JSON values: {"type": "text" | "tool_call" | "tool_result", ...fields}."""
    data: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            data.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCallPart):
            data.append({"type": "tool_call", "call_id": part.call_id, "server": part.server, "name": part.name,
                         "arguments": part.arguments})
        else:
            data.append({"type": "tool_result", "call_id": part.call_id, "text": part.text,
                         "is_error": part.is_error, "denied": part.denied})
    return data


def parts_json(parts: Sequence[Part]) -> str:
    """The parts as the history stores them: compact JSON text ("[]" for none)."""
    return json.dumps(parts_to_data(parts), ensure_ascii=False, separators=(",", ":"))


def checked_parts(parts: Sequence[Part]) -> tuple[Part, ...]:
    """The parts as the history will keep them (a lone surrogate, which UTF-8 cannot hold,
    made U+FFFD); ValueError if a field is wrong: a bug in the code that made them."""
    return parts_from_data(parts_to_data(parts), "the turn")


def parts_from_json(stored: object) -> tuple[Part, ...]:
    """Parts from the history's column: () where there are none, or where what is stored
    is not parts this code would write (a row another program wrote)."""
    if not isinstance(stored, str) or stored == "[]":
        return ()
    try:
        return parts_from_data(json.loads(stored), "the turn")
    except (ValueError, RecursionError):
        return ()


def parts_from_data(items: Any, where: str) -> tuple[Part, ...]:
    """Parts from JSON values, every field checked; ValueError in words naming `where`
    (the message they belong to: "message 3").

    Besides each field's type and length: a call's arguments are a JSON object's text,
    call ids are unique, and each result answers a call made earlier in the turn, once.
    """
    if not isinstance(items, list):
        raise ValueError(f"{where}'s parts must be a list.")
    if len(items) > MAX_PARTS:
        raise ValueError(f"{where} has {len(items):,} parts; at most {MAX_PARTS:,} can be kept.")
    parts: list[Part] = []
    calls: set[str] = set()
    answered: set[str] = set()
    for number, item in enumerate(items, start=1):
        part = _part(item, f"{where}'s part {number}")
        if isinstance(part, ToolCallPart):
            if part.call_id in calls:
                raise ValueError(f"{where} has two calls with the id {part.call_id!r}.")
            calls.add(part.call_id)
        elif isinstance(part, ToolResultPart):
            if part.call_id not in calls:
                raise ValueError(f"{where} has a result for {part.call_id!r}, which is no call made before it.")
            if part.call_id in answered:
                raise ValueError(f"{where} has two results for the call {part.call_id!r}.")
            answered.add(part.call_id)
        parts.append(part)
    return tuple(parts)


def _part(item: Any, where: str) -> Part:
    if not isinstance(item, dict):
        raise ValueError(f"{where} is not an object.")
    kind = item.get("type")
    if kind == "text":
        return TextPart(_text(item.get("text"), f"{where}'s text"))
    if kind == "tool_call":
        arguments = _text(item.get("arguments"), f"{where}'s arguments")
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            parsed = None
        if not isinstance(parsed, dict):
            raise ValueError(f"{where}'s arguments must be the text of a JSON object.")
        return ToolCallPart(_name(item.get("call_id"), f"{where}'s call_id", empty=False),
                            _name(item.get("server", ""), f"{where}'s server", empty=True),
                            _name(item.get("name"), f"{where}'s name", empty=False), arguments)
    if kind == "tool_result":
        return ToolResultPart(_name(item.get("call_id"), f"{where}'s call_id", empty=False),
                              _text(item.get("text"), f"{where}'s text"),
                              _flag(item.get("is_error", False), f"{where}'s is_error"),
                              _flag(item.get("denied", False), f"{where}'s denied"))
    shown = repr(kind) if len(repr(kind)) <= 40 else repr(kind)[:39] + "…"
    raise ValueError(f"{where} has type {shown}; it must be text, tool_call or tool_result.")


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a text (got {type(value).__name__}).")
    return _SURROGATE.sub("\ufffd", value)


def _name(value: Any, what: str, *, empty: bool) -> str:
    name = _text(value, what)
    if not name and not empty:
        raise ValueError(f"{what} must not be empty.")
    if len(name) > MAX_NAME:
        raise ValueError(f"{what} is {len(name):,} characters long; at most {MAX_NAME:,} can be kept.")
    if _CONTROL.search(name):
        raise ValueError(f"{what} must be one line of text (it holds a control character).")
    return name


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{what} must be true or false (got {value!r}).")
    return value


def searchable_text(parts: Sequence[Part]) -> str:
    """What search finds in a turn besides its text: each call's name and arguments and
    the start of each result ("" for a turn without tools: its search copy is its text).

    Every change to a turn's text (about once a second while it streams) indexes its
    search copy again: 8 whole results of 64,000 characters made that 42 ms a write, their
    first SEARCHED_RESULT_CHARS each a few ms.
    """
    found: list[str] = []
    for part in parts:
        if isinstance(part, ToolCallPart):
            found += [part.name, part.arguments]
        elif isinstance(part, ToolResultPart):
            found.append(part.text[:SEARCHED_RESULT_CHARS])
    return "\n".join(found)
