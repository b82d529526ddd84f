"""Ollama's streamed /api/chat (and /api/generate, for a raw prompt): the request's body, and its NDJSON read into pieces.

Ollama has no tool_choice: a call that was asked for ("required", a tool's name) is offered the
tools and left to the model, as Ollama's own clients do.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from app.engine.backends.remote.streamed import (Asked, Called, Ended, Fault, Piece, Said, compact_arguments, finish_of,
                                                 seed_of, tool_names)
from app.engine.protocol import ChatMessage, Generate
from app.library.servers.faults import ServerTrouble
from app.library.servers.wire import error_message


def asked(request: Generate, model: str, *, context_length: int, thinks: bool) -> Asked:
    """The request for this answer. context_length goes as num_ctx (what Kestrel fits the chat to);
    thinks: the model thinks (its capabilities say so), so the chat's thinking switch goes as `think`."""
    settings, shape = request.settings, request.shape
    options: dict[str, Any] = {"temperature": settings.temperature, "top_p": settings.top_p,
                               "top_k": settings.top_k, "repeat_penalty": settings.repeat_penalty,
                               "num_predict": settings.max_tokens, "num_ctx": context_length}
    if settings.min_p > 0:
        options["min_p"] = settings.min_p
    if seed_of(settings) is not None:
        options["seed"] = settings.seed
    if request.stop:
        options["stop"] = list(request.stop)
    body: dict[str, Any] = {"model": model, "stream": True, "options": options}
    if shape.prompt is not None:
        return Asked("/api/generate", {**body, "prompt": shape.prompt, "raw": True})
    names = tool_names(request.messages)
    body["messages"] = [_message(message, names) for message in request.messages]
    if shape.uses_tools and shape.tools is not None:
        body["tools"] = json.loads(shape.tools)
    if shape.json_schema is not None:
        body["format"] = json.loads(shape.json_schema)
    elif shape.json_object:
        body["format"] = "json"
    if thinks:
        body["think"] = settings.thinking
    return Asked("/api/chat", body)


def _message(message: ChatMessage, names: dict[str, str]) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": message.role.value, "content": message.content}
    if message.tool_calls:
        turn["tool_calls"] = [{"id": call.id, "function": {"index": call.index, "name": call.name,
                                                           "arguments": _arguments(call.arguments)}}
                              for call in message.tool_calls]
    if message.tool_call_id:
        turn["tool_call_id"] = message.tool_call_id
        if message.tool_call_id in names:
            turn["tool_name"] = names[message.tool_call_id]
    if message.images:
        turn["images"] = [base64.b64encode(image).decode("ascii") for image in message.images]
    return turn


def _arguments(text: str) -> Any:
    """Ollama takes a call's arguments as an object."""
    try:
        return json.loads(text or "{}")
    except ValueError:
        return text


def read(lines: Iterator[bytes], fault: Fault) -> Iterator[Piece]:
    """The answer's pieces from its JSON lines: text as it comes, each call as it comes (Ollama sends a call
    whole), then Ended from the line that says done. A stream that ends before it was cut off (DROPPED)."""
    for line in lines:
        if not line.strip():
            continue
        chunk = _chunk(line, fault)
        message = chunk.get("message")
        if isinstance(message, dict):
            yield from _pieces(message)
        else:  # /api/generate
            for key, thinking in (("thinking", True), ("response", False)):
                if isinstance(chunk.get(key), str) and chunk[key]:
                    yield Said(chunk[key], thinking)
        if chunk.get("done") is True:
            yield _ended(chunk)
            return
    raise fault(ServerTrouble.DROPPED, "")


def _chunk(line: bytes, fault: Fault) -> dict[str, Any]:
    try:
        chunk = json.loads(line)
    except (ValueError, RecursionError):
        raise fault(ServerTrouble.BAD_ANSWER, "a streamed line is not JSON") from None
    if not isinstance(chunk, dict):
        raise fault(ServerTrouble.BAD_ANSWER, "a streamed line is not a JSON object")
    said = error_message(chunk)
    if said is not None:
        raise fault(ServerTrouble.SERVER_ERROR, said)
    return chunk


def _pieces(message: dict[str, Any]) -> Iterator[Piece]:
    if isinstance(message.get("thinking"), str) and message["thinking"]:
        yield Said(message["thinking"], thinking=True)
    if isinstance(message.get("content"), str) and message["content"]:
        yield Said(message["content"])
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str) and function["name"]:
            yield Called(function["name"], compact_arguments(function.get("arguments") or {}),
                         call.get("id") if isinstance(call.get("id"), str) else "")


def _ended(chunk: dict[str, Any]) -> Ended:
    tokens, prompt, nanoseconds = (chunk.get(k) for k in ("eval_count", "prompt_eval_count", "eval_duration"))
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else None
    prompt = prompt if isinstance(prompt, int) and not isinstance(prompt, bool) and prompt >= 0 else None
    speed = None
    if tokens and isinstance(nanoseconds, (int, float)) and nanoseconds > 0:
        speed = round(tokens / (nanoseconds / 1e9), 2)
    return Ended(finish_of(chunk.get("done_reason")), tokens, prompt, speed)
