"""Anthropic's streamed Messages API (/v1/messages): the request's body, and its server-sent events read into pieces.

The event types are Anthropic's (https://docs.anthropic.com/en/api/messages-streaming): message_start
(the prompt's count), content_block_start / _delta / _stop (text_delta, thinking_delta, a tool_use
block's input_json_delta fragments), message_delta (stop_reason, the answer's count), message_stop,
ping, and error. A stream that ends before message_stop was cut off.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from app.core.answer_stats import FinishReason
from app.core.conversation import Role
from app.engine.backends.remote.streamed import (Asked, Called, Ended, Fault, Piece, Said, compact_arguments,
                                                 image_media_type)
from app.engine.protocol import ChatMessage, Generate
from app.library.servers.faults import ServerTrouble
from app.library.servers.wire import error_message

TEMPERATURE_HIGH = 1.0  # Anthropic's range is 0 to 1 (OpenAI's goes to 2)


def asked(request: Generate, model: str) -> Asked:
    """The request for this answer. The system turns go in `system`; tool results in a user turn's
    tool_result blocks; a raw prompt (Anthropic has no completions endpoint) as the one user turn.

    temperature and top_k go as the API's version 2023-06-01 has them (the one Kestrel names, and what
    compatible servers read), not top_p: Anthropic's models refused temperature and top_p together.
    No seed, min_p or repeat penalty: the API has none. A JSON schema has no field here either; the
    backend's callers learn it from the answer, as from a server that ignores response_format."""
    settings, shape = request.settings, request.shape
    body: dict[str, Any] = {"model": model, "max_tokens": settings.max_tokens, "stream": True,
                            "temperature": min(settings.temperature, TEMPERATURE_HIGH)}
    if settings.top_k > 0:
        body["top_k"] = settings.top_k
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    if shape.prompt is not None:
        body["messages"] = [{"role": "user", "content": shape.prompt}]
        return Asked("/messages", body)
    system = "\n\n".join(m.content for m in request.messages if m.role is Role.SYSTEM and m.content)
    if system:
        body["system"] = system
    body["messages"] = _turns([m for m in request.messages if m.role is not Role.SYSTEM])
    if shape.tools is not None:  # with "none" too: Anthropic refuses tool_use blocks in a request without tools
        body["tools"] = [_tool(entry) for entry in json.loads(shape.tools)]
        body["tool_choice"] = _tool_choice(shape.tool_choice)
    return Asked("/messages", body)


def _turns(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Anthropic's turns alternate user and assistant: tool results join the user turn that follows them
    (or make one), and turns of one role in a row are one turn of several blocks."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        blocks = _blocks(message)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role is Role.TOOL:
        return [{"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}]
    blocks: list[dict[str, Any]] = [_image(image) for image in message.images]
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call.arguments)})
    return blocks or [{"type": "text", "text": ""}]


def _image(image: bytes) -> dict[str, Any]:
    """A PNG or JPEG (Kestrel's image check makes one of the two) as a base64 source."""
    return {"type": "image", "source": {"type": "base64", "media_type": image_media_type(image),
                                        "data": base64.b64encode(image).decode("ascii")}}


def _input(arguments: str) -> dict[str, Any]:
    """A call's arguments as the object tool_use.input is (text that is not an object: none)."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _tool(entry: dict[str, Any]) -> dict[str, Any]:
    """A tool in Kestrel's (OpenAI's) shape as Anthropic's: name, description, input_schema."""
    function = entry.get("function", entry)
    tool: dict[str, Any] = {"name": function["name"],
                            "input_schema": function.get("parameters") or {"type": "object", "properties": {}}}
    if function.get("description"):
        tool["description"] = function["description"]
    return tool


def _tool_choice(choice: str) -> dict[str, str]:
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def read(lines: Iterator[bytes], fault: Fault) -> Iterator[Piece]:
    """The answer's pieces from its events: text and thinking as they come, each call once its block
    stops, then Ended at message_stop. An error event is the server's own (SERVER_ERROR)."""
    calls: dict[int, dict[str, str]] = {}
    finish = FinishReason.STOP
    prompt: int | None = None
    tokens: int | None = None
    for line in lines:
        if not line.startswith(b"data:"):
            continue  # blank lines between events, "event: <type>" (the data says its type too)
        event = _event(line[5:].strip(), fault)
        kind = event.get("type")
        if kind == "message_start":
            prompt = _count(_usage(event.get("message")), "input_tokens")
        elif kind == "content_block_start":
            _start(calls, event)
        elif kind == "content_block_delta":
            yield from _delta(calls, event)
        elif kind == "content_block_stop":
            call = calls.pop(_index(event), None)
            if call is not None and call["name"]:
                yield Called(call["name"], compact_arguments(call["arguments"] or call["input"]), call["id"])
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason") == "max_tokens":
                finish = FinishReason.LENGTH
            usage = _usage(event)  # Anthropic's counts here are running totals: the last one is the answer's
            tokens = _count(usage, "output_tokens") or tokens
            prompt = _count(usage, "input_tokens") or prompt
        elif kind == "message_stop":
            yield Ended(finish, tokens, prompt)
            return
    raise fault(ServerTrouble.DROPPED, "")


def _event(data: bytes, fault: Fault) -> dict[str, Any]:
    try:
        event = json.loads(data)
    except (ValueError, RecursionError):
        raise fault(ServerTrouble.BAD_ANSWER, "a streamed event is not JSON") from None
    if not isinstance(event, dict):
        raise fault(ServerTrouble.BAD_ANSWER, "a streamed event is not a JSON object")
    said = error_message(event)  # {"type": "error", "error": {"type": "overloaded_error", "message": …}}
    if said is not None:
        raise fault(ServerTrouble.SERVER_ERROR, said)
    return event


def _start(calls: dict[int, dict[str, str]], event: dict[str, Any]) -> None:
    """A tool_use block opens with its id and name; its input streams as JSON text after (a server may
    also give the input whole here)."""
    block = event.get("content_block")
    if isinstance(block, dict) and block.get("type") == "tool_use":
        given = block.get("input")
        calls[_index(event)] = {"id": str(block.get("id") or ""), "name": str(block.get("name") or ""),
                                "arguments": "", "input": json.dumps(given) if isinstance(given, dict) else ""}


def _delta(calls: dict[int, dict[str, str]], event: dict[str, Any]) -> Iterator[Said]:
    delta = event.get("delta")
    if not isinstance(delta, dict):
        return
    kind = delta.get("type")
    if kind == "text_delta" and isinstance(delta.get("text"), str) and delta["text"]:
        yield Said(delta["text"])
    elif kind == "thinking_delta" and isinstance(delta.get("thinking"), str) and delta["thinking"]:
        yield Said(delta["thinking"], thinking=True)
    elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
        call = calls.get(_index(event))
        if call is not None:
            call["arguments"] += delta["partial_json"]


def _index(event: dict[str, Any]) -> int:
    index = event.get("index")
    return index if isinstance(index, int) and not isinstance(index, bool) else 0


def _usage(holder: object) -> dict[str, Any]:
    usage = holder.get("usage") if isinstance(holder, dict) else None
    return usage if isinstance(usage, dict) else {}


def _count(usage: dict[str, Any], key: str) -> int | None:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
