"""OpenAI request bodies (chat, completions, responses) read into the service's ApiAsk, images included."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.core.conversation import Role
from app.engine.protocol import AnswerShape, ChatMessage, ToolCall
from app.server.errors import BadRequest
from app.server.fields import Body
from app.server.schemas import answer_schema, refuse_tool_schemas
from app.server.images import RequestImages, no_files
from app.service.api.api_answers import ApiAsk

# How long reading a request may take on its worker thread; its one slow part is walking a JSON
# schema, which the schema's bounds keep to well under a second (app/engine/grammar_bounds.py).
READ_BUDGET_S = 30.0

_ROLES = {"system": Role.SYSTEM, "developer": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT,
          "tool": Role.TOOL}


@dataclass(frozen=True)
class Asked:
    """What a request asks: the service's part, and how the answer is to be sent."""

    ask: ApiAsk
    stream: bool = False
    include_usage: bool = False

# The turns one request may carry: the engine makes prompts in linear time and stops when the client
# goes, but a 32 MB body of tiny messages would still hold it for about a minute (issue 35, item 6).
MAX_MESSAGES = 10_000


def sampling(body: Body, *, max_tokens_keys: tuple[str, ...], temperature_high: float = 2.0) -> dict[str, Any]:
    """The generation settings a request sets; the service lays them over the model's own. top_k,
    min_p and repeat_penalty are extensions OpenAI's API lacks and llama.cpp's server takes."""
    settings: dict[str, Any] = {}
    for key, low, high in (("temperature", 0.0, temperature_high), ("top_p", 0.0, 1.0),
                           ("min_p", 0.0, 1.0), ("repeat_penalty", 0.5, 3.0)):
        value = body.number(key, low, high)
        if value is not None:
            settings[key] = value
    top_k = body.integer("top_k", 0)
    if top_k is not None:
        settings["top_k"] = top_k
    for key in max_tokens_keys:  # the newer name wins where both are given
        value = body.integer(key, 1)
        if value is not None:
            settings["max_tokens"] = value
    seed = body.integer("seed")
    if seed is not None:
        settings["seed"] = seed
    return settings


def context_length(body: Body) -> int | None:
    """Kestrel's extension: the context this request needs (the openai client sends it via extra_body)."""
    return body.integer("context_length", 256, 1_048_576)


def content_text(body: Body, key: str, *, allow_null: bool = False, images: RequestImages | None = None) -> str:
    """A message's content: a string, or text and image parts; the images go to `images` (a user
    turn's; None: the turn takes none, and an image is refused in words, as audio and files are)."""
    value = body.data.get(key)
    if value is None:
        if allow_null:
            return ""
        raise body.missing(key, "a string or an array of content parts")
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise body.wrong(key, "a string or an array of content parts")
    pieces = []
    for part in body.objects(key):
        kind = part.text("type", required=True)
        if kind in ("text", "input_text", "output_text"):
            pieces.append(part.text("text", required=True) or "")
        elif kind == "refusal":
            pieces.append(part.text("refusal") or "")
        elif kind in ("image_url", "input_image"):
            if images is None:
                raise BadRequest(f"{part.name('type')} is {kind!r} in a message whose role is "
                                 f"{body.data.get('role')!r}: Kestrel takes images in user messages only.",
                                 part.name("type"))
            _image(part, kind, images)
        else:
            raise BadRequest(f"{part.name('type')} is {kind!r}: Kestrel takes text and image parts only (type "
                             "\"text\", or \"image_url\" with a data: URL).", part.name("type"))
    return "".join(pieces)


def _image(part: Body, kind: str, images: RequestImages) -> None:
    """Chat Completions' {"image_url": {"url": ..., "detail": ...}} (detail is ignored: the image
    check sizes every image alike), or the Responses API's {"image_url": "data:..."}."""
    if isinstance(part.data.get("image_url"), str):
        images.from_url(part, "image_url")
    elif kind == "input_image" and part.has("file_id") and not part.has("image_url"):
        raise BadRequest(f"{part.name('file_id')} names an uploaded file. {no_files()}", part.name("file_id"))
    elif kind == "input_image":
        images.from_url(part, "image_url")  # missing or of the wrong type: the 400 names it
    else:
        inner = part.child("image_url", required=True)
        assert inner is not None
        images.from_url(inner, "url")


def _tool_calls(message: Body) -> tuple[ToolCall, ...]:
    calls = []
    for index, call in enumerate(message.objects("tool_calls")):
        function = call.child("function", required=True)
        assert function is not None
        arguments = function.text("arguments") or "{}"
        calls.append(ToolCall(index=index, id=call.text("id") or f"call_{index}",
                              name=function.text("name", required=True) or "", arguments=arguments))
    return tuple(calls)


def chat_messages(body: Body, images: RequestImages) -> tuple[ChatMessage, ...]:
    """The request's turns; a user turn's images go to `images`, each with its turn's index."""
    messages = body.objects("messages", required=True, at_most=MAX_MESSAGES, what="messages")
    if not messages:
        raise BadRequest("messages must hold at least one message.", "messages")
    turns: list[ChatMessage] = []
    for message in messages:
        role_name = message.text("role", required=True)
        role = _ROLES.get(role_name or "")
        if role is None:
            raise BadRequest(f"{message.name('role')} is {role_name!r}; it must be one of "
                             f"{', '.join(_ROLES)}.", message.name("role"))
        calls = _tool_calls(message) if role is Role.ASSISTANT else ()
        text = content_text(message, "content", allow_null=role is Role.ASSISTANT,
                            images=images if role is Role.USER else None)
        images.belong_to(len(turns))
        call_id = message.text("tool_call_id", required=role is Role.TOOL) or ""
        turns.append(ChatMessage(role, text, tool_calls=calls, tool_call_id=call_id))
    return tuple(turns)


def response_format(body: Body, key: str = "response_format", *, nested: bool = True) -> AnswerShape:
    """The answer's shape response_format asks for: one JSON object, JSON that follows a schema (held
    to Kestrel's bounds here: app/server/schemas.py), or free text. The Responses API's text.format
    has the schema beside its type (nested False), Chat Completions' under json_schema."""
    shape = body.child(key)
    if shape is None:
        return AnswerShape()
    kind = shape.text("type", required=True)
    if kind == "text":
        return AnswerShape()
    if kind == "json_object":
        return AnswerShape(json_object=True)
    if kind == "json_schema":
        inner = shape.child("json_schema", required=True) if nested else shape
        assert inner is not None
        inner.child("schema", required=True)
        return AnswerShape(json_schema=answer_schema(inner.data["schema"], inner.name("schema")))
    raise BadRequest(f"{shape.name('type')} is {kind!r}; it must be text, json_object or json_schema.",
                     shape.name("type"))


def tools(body: Body) -> tuple[str | None, str]:
    """The tools in the OpenAI shape as JSON for the chat template, and tool_choice. A tool's
    parameters too deep or big to pass on are a 400, and so are those past what a grammar can
    hold when the answer is held to a call of that tool (app/server/schemas.refuse_tool_schemas)."""
    given = body.objects("tools")
    functions: list[dict[str, Any]] = []
    params: list[str] = []
    for tool in given:
        kind = tool.text("type") or "function"
        if kind != "function":
            raise BadRequest(f"{tool.name('type')} is {kind!r}: Kestrel runs function tools only.",
                             tool.name("type"))
        function = tool.child("function", required=True)
        assert function is not None
        name = function.text("name", required=True)
        entry: dict[str, Any] = {"name": name}
        description = function.text("description")
        if description is not None:
            entry["description"] = description
        parameters = function.child("parameters")
        entry["parameters"] = parameters.data if parameters is not None else {"type": "object", "properties": {}}
        functions.append({"type": "function", "function": entry})
        params.append(function.name("parameters"))
    choice = _tool_choice(body, {str(f["function"]["name"]) for f in functions})
    refuse_tool_schemas([(str(f["function"]["name"]), f["function"]["parameters"], param)
                         for f, param in zip(functions, params)], choice)
    return (json.dumps(functions) if functions else None), choice


def _tool_choice(body: Body, names: set[str]) -> str:
    value = body.data.get("tool_choice")
    if value is None:
        return "auto"
    if isinstance(value, str):
        if value not in ("auto", "none", "required"):
            raise BadRequest(f"tool_choice is {value!r}; it must be auto, none, required or a function.",
                             "tool_choice")
        return value
    choice = body.child("tool_choice")
    assert choice is not None
    function = choice.child("function", required=True)
    assert function is not None
    name = function.text("name", required=True) or ""
    if name not in names:
        raise BadRequest(f"tool_choice names the function {name!r}, which is not in tools.", "tool_choice")
    return name


async def read_off_loop(read: Callable[[Body, str], Asked], body: Body, client: str) -> Asked:
    """read(body, client) on a worker thread, within READ_BUDGET_S: a request's JSON schema is
    checked there, so the server's loop (the window's, in the app) goes on answering meanwhile."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(read, body, client), READ_BUDGET_S)
    except TimeoutError:
        raise BadRequest(f"Reading the request took more than {READ_BUDGET_S:g} s: its JSON schema is too big to "
                         "check. Make it smaller and ask again.") from None


def chat_ask(body: Body, client: str) -> Asked:
    """POST /v1/chat/completions."""
    n = body.integer("n", 1)
    if n not in (None, 1):
        raise BadRequest("n must be 1: Kestrel makes one answer per request.", "n")
    listed_tools, choice = tools(body)
    shape = dataclasses.replace(response_format(body), tools=listed_tools, tool_choice=choice)
    options = body.child("stream_options")
    images = RequestImages()
    messages = chat_messages(body, images)
    ask = ApiAsk(endpoint="/v1/chat/completions", client=client, model=body.text("model"),
                 messages=messages, images=tuple(images.found),
                 settings=sampling(body, max_tokens_keys=("max_tokens", "max_completion_tokens")),
                 stop=body.texts("stop"), context_length=context_length(body), shape=shape,
                 schema_param="response_format.json_schema.schema" if shape.json_schema is not None else None)
    return Asked(ask, bool(body.flag("stream")), bool(options and options.flag("include_usage")))


def completion_ask(body: Body, client: str) -> Asked:
    """POST /v1/completions: the prompt as it is, no chat template."""
    value = body.data.get("prompt")
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        prompt = value[0]
    elif isinstance(value, str):
        prompt = value
    elif value is None:
        raise body.missing("prompt", "a string")
    else:
        raise BadRequest("prompt must be a string (or an array holding one string).", "prompt")
    options = body.child("stream_options")
    ask = ApiAsk(endpoint="/v1/completions", client=client, model=body.text("model"),
                 settings=sampling(body, max_tokens_keys=("max_tokens",)), stop=body.texts("stop"),
                 context_length=context_length(body), shape=AnswerShape(prompt=prompt))
    return Asked(ask, bool(body.flag("stream")), bool(options and options.flag("include_usage")))


def responses_ask(body: Body, client: str) -> Asked:
    """POST /v1/responses: text in, text out, nothing kept between requests."""
    if body.has("previous_response_id") or body.has("conversation"):
        raise BadRequest("Kestrel keeps no responses between requests: send the whole conversation in input "
                         "instead of previous_response_id or conversation.", "previous_response_id")
    if body.items("tools"):
        raise BadRequest("/v1/responses takes no tools in Kestrel yet: use /v1/chat/completions for tool calls.",
                         "tools")
    turns = []
    images = RequestImages()
    instructions = body.text("instructions")
    if instructions:
        turns.append(ChatMessage(Role.SYSTEM, instructions))
    value = body.data.get("input")
    if isinstance(value, str):
        turns.append(ChatMessage(Role.USER, value))
    elif value is None:
        raise body.missing("input", "a string or an array of messages")
    elif isinstance(value, list):
        for item in body.objects("input", at_most=MAX_MESSAGES, what="messages"):
            kind = item.text("type") or "message"
            if kind != "message":
                raise BadRequest(f"{item.name('type')} is {kind!r}: /v1/responses takes messages only.",
                                 item.name("type"))
            role_name = item.text("role", required=True) or ""
            role = _ROLES.get(role_name)
            if role is None or role is Role.TOOL:
                raise BadRequest(f"{item.name('role')} is {role_name!r}; it must be system, developer, user "
                                 "or assistant.", item.name("role"))
            text = content_text(item, "content", images=images if role is Role.USER else None)
            images.belong_to(len(turns))
            turns.append(ChatMessage(role, text))
    else:
        raise body.wrong("input", "a string or an array of messages")
    shaped = body.child("text")
    shape = response_format(shaped, "format", nested=False) if shaped is not None else AnswerShape()
    ask = ApiAsk(endpoint="/v1/responses", client=client, model=body.text("model"), messages=tuple(turns),
                 images=tuple(images.found),
                 settings=sampling(body, max_tokens_keys=("max_output_tokens",)),
                 context_length=context_length(body), shape=shape,
                 schema_param="text.format.schema" if shape.json_schema is not None else None)
    return Asked(ask, bool(body.flag("stream")))

