"""Anthropic Messages request bodies read into the service's ApiAsk, images included."""

from __future__ import annotations

import json
from typing import Any

from app.core.conversation import Role
from app.engine.protocol import AnswerShape, ChatMessage, ToolCall
from app.server.errors import BadRequest
from app.server.fields import Body
from app.server.schemas import refuse_tool_schemas
from app.server.images import RequestImages, no_fetch, no_files
from app.server.openai_asks import MAX_MESSAGES, Asked, context_length, sampling
from app.service.api.api_answers import ApiAsk

# How an image is sent inline in this API.
_BASE64 = 'a base64 source ({"type": "base64", "media_type": "image/png", "data": ...})'


def _text_blocks(body: Body, key: str) -> str:
    """A string, or text blocks (system, tool_result content: images go in a user message's own content)."""
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
            images = "; Kestrel takes images in a user message's own content" if kind == "image" else ""
            raise BadRequest(f"{block.name('type')} is {kind!r}: {body.name(key)} takes text blocks only{images}.",
                             block.name("type"))
        pieces.append(block.text("text", required=True) or "")
    return "".join(pieces)


def _image(block: Body, role: Role, images: RequestImages) -> None:
    """An image block's source: base64 only (a URL is never fetched, and no files are kept)."""
    if role is not Role.USER:
        raise BadRequest(f"{block.name('type')} is 'image' in an {role.value} message: Kestrel takes images in "
                         "user messages only.", block.name("type"))
    source = block.child("source", required=True)
    assert source is not None
    kind = source.text("type", required=True)
    if kind == "base64":
        source.text("media_type", required=True)  # the check goes by the image's bytes, not this
        images.from_base64(source, "data")
    elif kind == "url":
        raise BadRequest(f"{source.name('type')} is 'url'. {no_fetch(_BASE64)}",
                         source.name("type"))
    elif kind == "file":
        raise BadRequest(f"{source.name('type')} is 'file'. {no_files(_BASE64)}",
                         source.name("type"))
    else:
        raise BadRequest(f"{source.name('type')} is {kind!r}; Kestrel takes an image as a base64 source.",
                         source.name("type"))


def _turns(message: Body, role: Role, images: RequestImages) -> list[ChatMessage]:
    """One Anthropic message as Kestrel's turns: tool results become tool turns of their own
    (before the message's own turn, which holds its text and images)."""
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
        elif kind == "image":
            _image(block, role, images)
        elif kind in ("thinking", "redacted_thinking"):
            continue  # a reasoning model's earlier thoughts: Kestrel's templates leave them out
        else:
            raise BadRequest(f"{block.name('type')} is {kind!r}: Kestrel takes text, image (from the user), "
                             "tool_use (from the assistant) and tool_result (from the user) blocks.", block.name("type"))
    return results if results and not (text or calls or images.holding) else \
        [*results, ChatMessage(role, "".join(text), tool_calls=tuple(calls))]


def _tools(body: Body) -> tuple[str | None, str]:
    functions: list[dict[str, Any]] = []
    params: list[str] = []
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
        params.append(tool.name("input_schema"))
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
    # The same bounds as the OpenAI shape's tools: a schema past them is a 400 naming it (issue 35, item 1).
    refuse_tool_schemas([(str(f["function"]["name"]), f["function"]["parameters"], param)
                         for f, param in zip(functions, params)], choice)
    return (json.dumps(functions) if functions else None), choice


def messages_ask(body: Body, client: str) -> Asked:
    """POST /v1/messages."""
    body.integer("max_tokens", 1, required=True)
    turns = []
    system = _text_blocks(body, "system")
    if system:
        turns.append(ChatMessage(Role.SYSTEM, system))
    messages = body.objects("messages", required=True, at_most=MAX_MESSAGES, what="messages")
    images = RequestImages()
    if not messages:
        raise BadRequest("messages must hold at least one message.", "messages")
    for message in messages:
        role_name = message.text("role", required=True)
        if role_name not in ("user", "assistant"):
            raise BadRequest(f"{message.name('role')} is {role_name!r}; it must be user or assistant (the "
                             "system prompt goes in system).", message.name("role"))
        own = _turns(message, Role(role_name), images)
        images.belong_to(len(turns) + len(own) - 1)  # the message's own turn is its last
        turns.extend(own)
    listed, choice = _tools(body)
    ask = ApiAsk(endpoint="/v1/messages", client=client, model=body.text("model"), messages=tuple(turns),
                 images=tuple(images.found),
                 settings=sampling(body, max_tokens_keys=("max_tokens",), temperature_high=1.0),
                 stop=body.texts("stop_sequences"), context_length=context_length(body),
                 shape=AnswerShape(tools=listed, tool_choice=choice))
    return Asked(ask, bool(body.flag("stream")))

