"""OpenAI's streamed Chat Completions (and Completions, for a raw prompt): the request's body, and its SSE read into pieces."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from app.core.answer_stats import FinishReason
from app.engine.backends.remote.streamed import (Asked, Called, Ended, Fault, Piece, Said, compact_arguments, finish_of,
                                                 image_media_type, seed_of)
from app.engine.protocol import ChatMessage, Generate
from app.library.servers.faults import ServerTrouble
from app.library.servers.wire import error_message


def asked(request: Generate, model: str) -> Asked:
    """The request for this answer: /chat/completions, or /completions for a raw prompt."""
    settings, shape = request.settings, request.shape
    body: dict[str, Any] = {"model": model, "stream": True, "stream_options": {"include_usage": True},
                            "temperature": settings.temperature, "top_p": settings.top_p,
                            "max_tokens": settings.max_tokens}
    if seed_of(settings) is not None:
        body["seed"] = settings.seed
    if settings.min_p > 0:  # not OpenAI's own: sent only when asked, for the servers that take it
        body["min_p"] = settings.min_p
    if request.stop:
        body["stop"] = list(request.stop)
    if shape.prompt is not None:
        return Asked("/completions", {**body, "prompt": shape.prompt})
    body["messages"] = [_message(message) for message in request.messages]
    if shape.uses_tools and shape.tools is not None:
        body["tools"] = json.loads(shape.tools)
        body["tool_choice"] = (shape.tool_choice if shape.tool_choice in ("auto", "required")
                               else {"type": "function", "function": {"name": shape.tool_choice}})
    if shape.json_schema is not None:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "answer", "schema": json.loads(shape.json_schema)}}
    elif shape.json_object:
        body["response_format"] = {"type": "json_object"}
    return Asked("/chat/completions", body)


def _message(message: ChatMessage) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": message.role.value, "content": _content(message)}
    if message.tool_calls:  # content stays text, "" when none: llama-cpp-python's server refuses OpenAI's null
        turn["tool_calls"] = [{"id": call.id, "type": "function",
                               "function": {"name": call.name, "arguments": call.arguments}}
                              for call in message.tool_calls]
    if message.tool_call_id:
        turn["tool_call_id"] = message.tool_call_id
    return turn


def _content(message: ChatMessage) -> str | list[dict[str, Any]]:
    """The turn's text, or with images its parts: the text, then each image as a data URL (OpenAI's image_url
    part; a server that takes no images refuses it in its own words)."""
    if not message.images:
        return message.content
    parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    for image in message.images:
        data = base64.b64encode(image).decode("ascii")
        parts.append({"type": "image_url", "image_url": {"url": f"data:{image_media_type(image)};base64,{data}"}})
    return parts


def read(lines: Iterator[bytes], fault: Fault) -> Iterator[Piece]:
    """The answer's pieces from its server-sent events: text as it comes, each call once whole, then Ended.

    A stream that ends with neither [DONE] nor a finish reason was cut off (DROPPED); an error object in
    it is the server's own (SERVER_ERROR)."""
    calls: dict[int, dict[str, str]] = {}
    finish: FinishReason | None = None
    usage: dict[str, Any] = {}
    speed: float | None = None
    done = False
    for line in lines:
        if not line.startswith(b"data:"):
            continue  # blank lines between events, comments (": ping"), event: names
        data = line[5:].strip()
        if data == b"[DONE]":
            done = True
            break
        chunk = _chunk(data, fault)
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        timings = chunk.get("timings")  # llama-server's own report of its speed
        if isinstance(timings, dict) and isinstance(timings.get("predicted_per_second"), (int, float)):
            speed = float(timings["predicted_per_second"])
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            yield from _said(choice)
            _gather(calls, choice)
            if choice.get("finish_reason"):
                finish = finish_of(choice["finish_reason"])
    if not done and finish is None:
        raise fault(ServerTrouble.DROPPED, "")
    for index in sorted(calls):
        call = calls[index]
        if call["name"]:
            yield Called(call["name"], compact_arguments(call["arguments"]), call["id"])
    yield Ended(finish or FinishReason.STOP, _count(usage, "completion_tokens"), _count(usage, "prompt_tokens"), speed)


def _chunk(data: bytes, fault: Fault) -> dict[str, Any]:
    try:
        chunk = json.loads(data)
    except (ValueError, RecursionError):
        raise fault(ServerTrouble.BAD_ANSWER, "a streamed event is not JSON") from None
    if not isinstance(chunk, dict):
        raise fault(ServerTrouble.BAD_ANSWER, "a streamed event is not a JSON object")
    said = error_message(chunk)
    if said is not None:
        raise fault(ServerTrouble.SERVER_ERROR, said)
    return chunk


def _said(choice: dict[str, Any]) -> Iterator[Said]:
    delta = choice.get("delta")
    if not isinstance(delta, dict):  # /completions: the text is the choice's own
        text = choice.get("text")
        if isinstance(text, str) and text:
            yield Said(text)
        return
    thought = delta.get("reasoning_content") or delta.get("reasoning")  # llama-server, LM Studio, vLLM
    if isinstance(thought, str) and thought:
        yield Said(thought, thinking=True)
    content = delta.get("content")
    if isinstance(content, str) and content:
        yield Said(content)


def _gather(calls: dict[int, dict[str, str]], choice: dict[str, Any]) -> None:
    """A call streams in fragments, by index: its id and name first, its arguments' text in pieces."""
    delta = choice.get("delta")
    fragments = delta.get("tool_calls") if isinstance(delta, dict) else None
    for number, fragment in enumerate(fragments if isinstance(fragments, list) else ()):
        if not isinstance(fragment, dict):
            continue
        given = fragment.get("index")
        index = given if isinstance(given, int) else number
        call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        if isinstance(fragment.get("id"), str):
            call["id"] = call["id"] or fragment["id"]
        function = fragment.get("function")
        if isinstance(function, dict):
            # OpenAI sends the name once; llama-cpp-python's server repeats it in every fragment.
            if isinstance(function.get("name"), str) and function["name"] != call["name"]:
                call["name"] += function["name"]
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call["arguments"] += arguments
            elif isinstance(arguments, dict):  # a server that sends the object whole
                call["arguments"] = json.dumps(arguments)


def _count(usage: dict[str, Any], key: str) -> int | None:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
