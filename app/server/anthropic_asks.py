"""Anthropic Messages request bodies read into the service's ApiAsk."""

from __future__ import annotations

import json
from typing import Any

from app.core.conversation import Role
from app.engine.protocol import AnswerShape, ChatMessage
from app.engine.tool_calls import ToolCall
from app.server.errors import BadRequest
from app.server.fields import Body
from app.server.openai_asks import Asked, context_length, sampling
from app.service.api_answers import ApiAsk


def _text_blocks(body: Body, key: str) -> str:
    """A string, or text blocks (system, tool_result content)."""
    value = body.data.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise body.wrong(key, "a string or an array of text blocks")
    pieces = []
    for block in body.objects(key):
        kind = block.text("type", required=True)
        if kind != "text":
            raise BadRequest(f"{block.name('type')} is {kind!r}: Kestrel's models read text only.",
                             block.name("type"))
        pieces.append(block.text("text", required=True) or "")
    return "".join(pieces)


def _turns(message: Body, role: Role) -> list[ChatMessage]:
    """One Anthropic message as Kestrel's turns: tool results become tool turns of their own."""
    value = message.data.get("content")
    if isinstance(value, str):
        return [ChatMessage(role, value)]
    if not isinstance(value, list):
        raise message.wrong("content", "a string or an array of content blocks") if value is not None \
            else message.missing("content", "a string or an array of content blocks")
    text: list[str] = []
    calls: list[ToolCall] = []
    results: list[ChatMessage] = []
    for block in message.objects("content"):
        kind = block.text("type", required=True)
        if kind == "text":
            text.append(block.text("text", required=True) or "")
        elif kind == "tool_use" and role is Role.ASSISTANT:
            given = block.child("input")
            calls.append(ToolCall(index=len(calls), id=block.text("id", required=True) or "",
                                  name=block.text("name", required=True) or "",
                                  arguments=json.dumps(given.data if given is not None else {})))
        elif kind == "tool_result" and role is Role.USER:
            result = _text_blocks(block, "content")
            if block.flag("is_error"):
                result = f"Error: {result}"
            results.append(ChatMessage(Role.TOOL, result, tool_call_id=block.text("tool_use_id", required=True)
                                       or ""))
        elif kind in ("thinking", "redacted_thinking"):
            continue  # a reasoning model's earlier thoughts: Kestrel's templates leave them out
        else:
            raise BadRequest(f"{block.name('type')} is {kind!r}: Kestrel takes text, tool_use (from the "
                             "assistant) and tool_result (from the user) blocks.", block.name("type"))
    turns = results
    if text or calls or not results:
        turns = [*results, ChatMessage(role, "".join(text), tool_calls=tuple(calls))]
    return turns


def _tools(body: Body) -> tuple[str | None, str]:
    functions: list[dict[str, Any]] = []
    for tool in body.objects("tools"):
        kind = tool.text("type")
        if kind not in (None, "custom"):
            raise BadRequest(f"{tool.name('type')} is {kind!r}: Kestrel runs tools you define (name, "
                             "description, input_schema) only.", tool.name("type"))
        entry: dict[str, Any] = {"name": tool.text("name", required=True)}
        description = tool.text("description")
        if description is not None:
            entry["description"] = description
        schema = tool.child("input_schema", required=True)
        assert schema is not None
        entry["parameters"] = schema.data
        functions.append({"type": "function", "function": entry})
    choice = "auto"
    given = body.child("tool_choice")
    if given is not None:
        kind = given.text("type", required=True)
        if kind == "tool":
            choice = given.text("name", required=True) or ""
            if choice not in {f["function"]["name"] for f in functions}:
                raise BadRequest(f"tool_choice names the tool {choice!r}, which is not in tools.", "tool_choice")
        elif kind in ("auto", "none", "any"):
            choice = "required" if kind == "any" else kind
        else:
            raise BadRequest(f"tool_choice.type is {kind!r}; it must be auto, any, tool or none.",
                             "tool_choice.type")
    return (json.dumps(functions) if functions else None), choice


def messages_ask(body: Body, client: str) -> Asked:
    """POST /v1/messages."""
    body.integer("max_tokens", 1, required=True)
    turns = []
    system = _text_blocks(body, "system")
    if system:
        turns.append(ChatMessage(Role.SYSTEM, system))
    messages = body.objects("messages", required=True)
    if not messages:
        raise BadRequest("messages must hold at least one message.", "messages")
    for message in messages:
        role_name = message.text("role", required=True)
        if role_name not in ("user", "assistant"):
            raise BadRequest(f"{message.name('role')} is {role_name!r}; it must be user or assistant (the "
                             "system prompt goes in system).", message.name("role"))
        turns.extend(_turns(message, Role(role_name)))
    listed, choice = _tools(body)
    ask = ApiAsk(endpoint="/v1/messages", client=client, model=body.text("model"), messages=tuple(turns),
                 settings=sampling(body, max_tokens_keys=("max_tokens",), temperature_high=1.0),
                 stop=body.texts("stop_sequences"), context_length=context_length(body),
                 shape=AnswerShape(tools=listed, tool_choice=choice))
    return Asked(ask, bool(body.flag("stream")))

