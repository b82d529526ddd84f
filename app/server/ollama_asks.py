"""Ollama's request bodies (/api/chat, /api/generate, /api/embed, /api/embeddings) read into the service's asks.

Field names and defaults as Ollama's API reference and its official client (ollama-python's
_types.py) write them: `stream` is true unless false, sampling lives in `options`, images are
base64 strings beside a message's content, tool calls carry their arguments as an object.
"""

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
from app.server.images import RequestImages
from app.server.openai_asks import MAX_MESSAGES, READ_BUDGET_S, sampling, tools
from app.server.schemas import answer_schema
from app.server.openai_embeddings import input_texts
from app.service.api.api_answers import ApiAsk, EmbeddingAsk

# Ollama's default tag: "tiny:latest" names Kestrel's model "tiny".
LATEST = ":latest"
_ROLES = {"system": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT, "tool": Role.TOOL}
# The context a request may ask for in options.num_ctx (the service's own bounds: api_context.py).
_CONTEXT = (256, 1_048_576)


@dataclass(frozen=True)
class OllamaAsked:
    """What a request asks: the service's part, whether to stream (Ollama's default: yes), and
    whether to send the model's thinking (think: false leaves it out)."""

    ask: ApiAsk
    stream: bool = True
    thinking: bool = True


def model_name(body: Body, key: str = "model") -> str | None:
    """The model the request names, ":latest" taken off (Kestrel's ids carry no tag); Ollama's
    older `name` is read where `model` is absent."""
    name = body.text(key) or body.text("name")
    if name and name.endswith(LATEST):
        name = name[:-len(LATEST)]
    return name


def _options(body: Body) -> tuple[dict[str, Any], tuple[str, ...], int | None]:
    """options' sampling (temperature, top_p, top_k, min_p, repeat_penalty, seed, num_predict), its stop
    strings and num_ctx; every other option Ollama knows (mirostat, num_gpu, …) is taken and ignored."""
    options = body.child("options")
    if options is None:
        return {}, (), None
    settings = sampling(options, max_tokens_keys=())
    predict = options.integer("num_predict")
    if predict is not None and predict > 0:  # -1 (no limit) and -2 (fill the context): the model's own limit
        settings["max_tokens"] = predict
    elif predict == 0:
        raise BadRequest("options.num_predict is 0: ask for at least 1 token, or -1 for the model's own limit.",
                         "options.num_predict")
    return settings, options.texts("stop"), options.integer("num_ctx", *_CONTEXT)


def _shape(body: Body) -> tuple[AnswerShape, str | None]:
    """format: "" (free text), "json" (one JSON object) or a JSON schema; and the field that holds a schema."""
    value = body.data.get("format")
    if value is None or value == "":
        return AnswerShape(), None
    if value == "json":
        return AnswerShape(json_object=True), None
    if isinstance(value, dict):
        return AnswerShape(json_schema=answer_schema(value, "format")), "format"
    raise BadRequest(f"format must be \"json\" or a JSON schema object, not {json.dumps(value)[:40]}.", "format")


def _think(body: Body) -> bool:
    """think: true or false, or a level ("low", "medium", "high"), which Kestrel takes as true. False turns
    a reasoning model's thinking off where its template has the switch, and leaves thinking out of the answer."""
    value = body.data.get("think")
    if value is None or isinstance(value, bool):
        return value is not False
    if value in ("low", "medium", "high"):
        return True
    raise BadRequest("think must be true, false, \"low\", \"medium\" or \"high\".", "think")


def _images(message: Body, images: RequestImages) -> None:
    """A message's `images`: base64 strings (the official client encodes bytes and files so)."""
    for index, value in enumerate(message.items("images") or []):
        key = f"images[{index}]"
        image = Body({key: value}, message.at)
        if not isinstance(value, str):
            raise image.wrong(key, "a base64 string")
        images.from_base64(image, key)


def _calls(message: Body, turn: int) -> tuple[ToolCall, ...]:
    """An assistant turn's tool_calls: {"function": {"name", "arguments": {...}}}, an id where the client kept one."""
    calls = []
    for index, call in enumerate(message.objects("tool_calls")):
        function = call.child("function", required=True)
        assert function is not None
        arguments = function.data.get("arguments")
        if arguments is None:
            arguments = {}
        if isinstance(arguments, str):  # some clients send the OpenAI form
            text = arguments
        elif isinstance(arguments, dict):
            text = json.dumps(arguments, ensure_ascii=False)
        else:
            raise function.wrong("arguments", "an object")
        calls.append(ToolCall(index=index, id=call.text("id") or f"call_{turn}_{index}",
                              name=function.text("name", required=True) or "", arguments=text))
    return tuple(calls)


def _answered_call(turns: list[ChatMessage], name: str | None) -> str:
    """The id of the call a tool turn answers: Ollama names the tool (tool_name), not the call, so
    the earliest call of that name (or any, unnamed) in the last assistant turn not yet answered."""
    answered = set()
    for turn in reversed(turns):
        if turn.role is Role.TOOL:
            answered.add(turn.tool_call_id)
        elif turn.role is Role.ASSISTANT:
            for call in turn.tool_calls:
                if call.id not in answered and (not name or call.name == name):
                    return call.id
            return ""
    return ""


def chat_messages(body: Body, images: RequestImages) -> tuple[ChatMessage, ...]:
    messages = body.objects("messages", at_most=MAX_MESSAGES, what="messages")
    turns: list[ChatMessage] = []
    for message in messages:
        role_name = message.text("role", required=True)
        role = _ROLES.get(role_name or "")
        if role is None:
            raise BadRequest(f"{message.name('role')} is {role_name!r}; it must be one of {', '.join(_ROLES)}.",
                             message.name("role"))
        if role is not Role.USER and message.items("images"):
            raise BadRequest(f"{message.name('images')} is in a message whose role is {role_name!r}: Kestrel takes "
                             "images in user messages only.", message.name("images"))
        _images(message, images)
        images.belong_to(len(turns))
        content = message.text("content") or ""
        if role is Role.TOOL:
            call_id = message.text("tool_call_id") or _answered_call(turns, message.text("tool_name"))
            turns.append(ChatMessage(role, content, tool_call_id=call_id))
        else:
            calls = _calls(message, len(turns)) if role is Role.ASSISTANT else ()
            turns.append(ChatMessage(role, content, thinking=message.text("thinking") or "", tool_calls=calls))
    return tuple(turns)


def chat_ask(body: Body, client: str) -> OllamaAsked:
    """POST /api/chat. No messages (Ollama's way to load a model) is answered by the caller."""
    listed_tools, choice = tools(body)
    shape, schema_param = _shape(body)
    settings, stop, context = _options(body)
    images = RequestImages()
    messages = chat_messages(body, images)
    thinking = _think(body)
    if not thinking:
        settings["thinking"] = False
    ask = ApiAsk(endpoint="/api/chat", client=client, model=model_name(body), messages=messages,
                 images=tuple(images.found), settings=settings, stop=stop, context_length=context,
                 shape=dataclasses.replace(shape, tools=listed_tools, tool_choice=choice), schema_param=schema_param)
    # keep_alive is taken and ignored: Kestrel unloads a model after its own idle time (a setting).
    return OllamaAsked(ask, body.flag("stream") is not False, thinking)


def generate_ask(body: Body, client: str) -> OllamaAsked:
    """POST /api/generate: the prompt as a user turn under the model's chat template (with `system`
    before it), or as the whole prompt when raw is true. suffix and template are refused in words."""
    if body.text("suffix"):
        raise BadRequest("suffix asks for fill-in-the-middle, which Kestrel does not do: send the text before the "
                         "gap as the prompt and leave suffix out.", "suffix")
    if body.text("template"):
        raise BadRequest("template is not taken: Kestrel uses the model's own chat template. Leave template out, or "
                         "send raw: true with the whole prompt already in its template.", "template")
    if body.items("context"):
        raise BadRequest("context (the token ids of an earlier answer) is not taken: Kestrel keeps nothing between "
                         "requests. Send the conversation to /api/chat instead.", "context")
    prompt = body.text("prompt") or ""
    shape, schema_param = _shape(body)
    settings, stop, context = _options(body)
    images = RequestImages()
    raw = bool(body.flag("raw"))
    messages: tuple[ChatMessage, ...] = ()
    if raw:
        if body.items("images"):
            raise BadRequest("images cannot go with raw: true: the model's chat template places them. Leave raw "
                             "out to send images.", "images")
        shape = dataclasses.replace(shape, prompt=prompt)
    else:
        system = body.text("system")
        turns = [ChatMessage(Role.SYSTEM, system)] if system else []
        _images(body, images)
        images.belong_to(len(turns))
        messages = (*turns, ChatMessage(Role.USER, prompt))
    thinking = _think(body)
    if not thinking:
        settings["thinking"] = False
    ask = ApiAsk(endpoint="/api/generate", client=client, model=model_name(body), messages=messages,
                 images=tuple(images.found), settings=settings, stop=stop, context_length=context, shape=shape,
                 schema_param=schema_param)
    return OllamaAsked(ask, body.flag("stream") is not False, thinking)


def embed_ask(body: Body, client: str) -> EmbeddingAsk:
    """POST /api/embed: `input` a string or an array of strings; `truncate` is taken, but an input past
    the model's context is refused (cutting it would change its meaning unasked)."""
    texts = input_texts(body)
    body.flag("truncate")
    return EmbeddingAsk(client=client, model=model_name(body), texts=texts,
                        dimensions=body.integer("dimensions", low=1))


def embeddings_ask(body: Body, client: str) -> EmbeddingAsk | None:
    """POST /api/embeddings (Ollama's older endpoint): one `prompt`; None for an empty one, which
    Ollama answers with an empty vector."""
    prompt = body.text("prompt")
    if not prompt:
        return None
    return EmbeddingAsk(client=client, model=model_name(body), texts=(prompt,))


async def read_off_loop(read: Callable[[Body, str], OllamaAsked], body: Body, client: str) -> OllamaAsked:
    """read(body, client) on a worker thread, within READ_BUDGET_S, as openai_asks.read_off_loop: a
    request's JSON schema (format, a tool's parameters) is checked there, off the server's loop."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(read, body, client), READ_BUDGET_S)
    except TimeoutError:
        raise BadRequest(f"Reading the request took more than {READ_BUDGET_S:g} s: its JSON schema is too big to "
                         "check. Make it smaller and ask again.") from None
