"""OpenAI's endpoints: /v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app.core.answer_stats import AnswerStats
from app.core.paths import data_paths
from app.engine.protocol import Delta, Done, ToolCall
from app.server import sse
from app.server.endpoint import client_of, guarded, read_body
from app.server.errors import Flavor, error_body, refused_code
from app.server.openai_asks import Asked, chat_ask, completion_ask, read_off_loop
from app.server.openai_embeddings import embedding_ask, embedding_list
from app.server.speech_listing import speech_entries
from app.server.runs import (CLIENT_GONE, Collected, Event, close, collect, cut_short, opened, outcome_of,
                             until_gone)
from app.service.api.api_answers import ApiAnswers, ApiModel, ApiRefused, Started

def usage(stats: AnswerStats) -> dict[str, int]:
    return {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.tokens,
            "total_tokens": stats.prompt_tokens + stats.tokens}


def finish_reason(stats: AnswerStats, calls: bool) -> str:
    if cut_short(stats):
        return "length"
    return "tool_calls" if calls else "stop"


def model_entry(model: ApiModel) -> dict[str, Any]:
    # Past OpenAI's four fields, Kestrel's own (a client that does not know them ignores them):
    # vision says the model takes images (image_url parts); no standard field says so.
    return {"id": model.id, "object": "model", "created": model.created, "owned_by": "kestrel",
            "name": model.name, "context_length": model.context_length, "format": model.format,
            "loaded": model.loaded, "vision": model.vision}


def anthropic_model_entry(model: ApiModel) -> dict[str, Any]:
    # context_length and vision (it takes image blocks) are Kestrel's own, as in model_entry.
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(model.created))
    return {"id": model.id, "type": "model", "display_name": model.name, "created_at": created,
            "context_length": model.context_length, "vision": model.vision}


def tool_call_entry(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def chat_completion(got: Collected, answer_id: str, created: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": got.text if got.text or not got.calls else None,
                               "refusal": None}
    if got.thinking:
        message["reasoning_content"] = got.thinking
    if got.calls:
        message["tool_calls"] = [tool_call_entry(call) for call in got.calls]
    return {"id": answer_id, "object": "chat.completion", "created": created, "model": got.started.model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish_reason(got.stats, bool(got.calls))}],
            "usage": usage(got.stats)}


def _speech_folder() -> Path:
    return data_paths().data / "speech"


class OpenAiEndpoints:
    """The handlers, over the service's ApiAnswers."""

    def __init__(self, answers: ApiAnswers) -> None:
        self._answers = answers

    def routes(self) -> list[Route]:
        return [Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/models/{model_id:path}", self.model, methods=["GET"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/embeddings", self.embeddings, methods=["POST"])]

    async def models(self, request: Request) -> Response:
        models = await self._answers.models()
        if "anthropic-version" in request.headers:  # the anthropic client's models.list()
            entries = [anthropic_model_entry(model) for model in models]
            return JSONResponse({"data": entries, "has_more": False,
                                 "first_id": entries[0]["id"] if entries else None,
                                 "last_id": entries[-1]["id"] if entries else None})
        speech = await asyncio.to_thread(speech_entries, _speech_folder())
        return JSONResponse({"object": "list", "data": [*(model_entry(model) for model in models), *speech]})

    async def model(self, request: Request) -> Response:
        wanted = request.path_params["model_id"]
        for model in await self._answers.models():
            if model.id == wanted:
                anthropic = "anthropic-version" in request.headers
                return JSONResponse(anthropic_model_entry(model) if anthropic else model_entry(model))
        if "anthropic-version" not in request.headers:
            for entry in await asyncio.to_thread(speech_entries, _speech_folder()):
                if entry["id"] == wanted:
                    return JSONResponse(entry)
        flavor = Flavor.ANTHROPIC if "anthropic-version" in request.headers else Flavor.OPENAI
        return JSONResponse(error_body(flavor, 404, f"There is no installed model {wanted!r}. GET /v1/models "
                                                    "lists the installed ones.", "model", "model_not_found"),
                            status_code=404)

    async def embeddings(self, request: Request) -> Response:
        async def work() -> Response:
            asked = embedding_ask(await read_body(request), client_of(request))
            got = await until_gone(request, self._answers.embed(asked.ask))
            outcome = outcome_of(request)
            outcome.model, outcome.prompt_tokens = got.model, got.prompt_tokens
            body = await asyncio.to_thread(embedding_list, got, asked.base64)
            return Response(body, media_type="application/json")

        return await guarded(Flavor.OPENAI, request, work)

    async def chat(self, request: Request) -> Response:
        async def work() -> Response:
            asked = await read_off_loop(chat_ask, await read_body(request), client_of(request))
            answer_id, created = sse.new_id("chatcmpl-"), int(time.time())
            if asked.stream:
                started, stream = await opened(request, self._answers, asked.ask)
                return _streaming(_chat_chunks(request, asked, started, stream, answer_id, created))
            got = await collect(request, self._answers, asked.ask)
            return JSONResponse(chat_completion(got, answer_id, created))

        return await guarded(Flavor.OPENAI, request, work)

    async def completions(self, request: Request) -> Response:
        async def work() -> Response:
            asked = completion_ask(await read_body(request), client_of(request))
            answer_id, created = sse.new_id("cmpl-"), int(time.time())
            if asked.stream:
                started, stream = await opened(request, self._answers, asked.ask)
                return _streaming(_completion_chunks(request, asked, started, stream, answer_id, created))
            got = await collect(request, self._answers, asked.ask)
            return JSONResponse({"id": answer_id, "object": "text_completion", "created": created,
                                 "model": got.started.model,
                                 "choices": [{"index": 0, "text": got.text, "logprobs": None,
                                              "finish_reason": finish_reason(got.stats, False)}],
                                 "usage": usage(got.stats)})

        return await guarded(Flavor.OPENAI, request, work)


def _streaming(body: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(body, media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)


async def _chat_chunks(request: Request, asked: Asked, started: Started, stream: AsyncIterator[Event],
                       answer_id: str, created: int) -> AsyncIterator[bytes]:
    """The answer as chat.completion.chunk events, the way the openai client accumulates them."""
    outcome = outcome_of(request)
    head = {"id": answer_id, "object": "chat.completion.chunk", "created": created, "model": started.model}
    extra = {"usage": None} if asked.include_usage else {}

    def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
        return sse.data({**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                               "finish_reason": reason}], **extra})

    calls = 0
    try:
        yield chunk({"role": "assistant", "content": ""})
        async for event in stream:
            if isinstance(event, Delta) and event.tool_call is not None:
                call = event.tool_call
                calls += 1
                # Name first, then the arguments: as OpenAI streams them, and as clients that
                # accumulate `arguments` by appending expect.
                yield chunk({"tool_calls": [{"index": call.index, "id": call.id, "type": "function",
                                             "function": {"name": call.name, "arguments": ""}}]})
                yield chunk({"tool_calls": [{"index": call.index, "function": {"arguments": call.arguments}}]})
            elif isinstance(event, Delta) and event.text:
                yield chunk({"reasoning_content": event.text} if event.thinking else {"content": event.text})
            elif isinstance(event, Done):
                outcome.done(event.stats)
                yield chunk({}, finish_reason(event.stats, calls > 0))
                if asked.include_usage:
                    yield sse.data({**head, "choices": [], "usage": usage(event.stats)})
        yield sse.DONE
    except ApiRefused as refused:  # the engine failed mid-answer
        outcome.status = refused.status
        yield sse.data(error_body(Flavor.OPENAI, refused.status, refused.message, refused.param,
                                  refused_code(refused)))
    except (asyncio.CancelledError, GeneratorExit):  # the client went away
        outcome.status = CLIENT_GONE
        raise
    finally:
        await close(stream)


async def _completion_chunks(request: Request, asked: Asked, started: Started, stream: AsyncIterator[Event],
                             answer_id: str, created: int) -> AsyncIterator[bytes]:
    outcome = outcome_of(request)
    head = {"id": answer_id, "object": "text_completion", "created": created, "model": started.model}
    try:
        async for event in stream:
            if isinstance(event, Delta) and event.text and not event.thinking:
                yield sse.data({**head, "choices": [{"index": 0, "text": event.text, "logprobs": None,
                                                      "finish_reason": None}]})
            elif isinstance(event, Done):
                outcome.done(event.stats)
                yield sse.data({**head, "choices": [{"index": 0, "text": "", "logprobs": None,
                                                      "finish_reason": finish_reason(event.stats, False)}]})
                if asked.include_usage:
                    yield sse.data({**head, "choices": [], "usage": usage(event.stats)})
        yield sse.DONE
    except ApiRefused as refused:
        outcome.status = refused.status
        yield sse.data(error_body(Flavor.OPENAI, refused.status, refused.message, refused.param,
                                  refused_code(refused)))
    except (asyncio.CancelledError, GeneratorExit):  # the client went away
        outcome.status = CLIENT_GONE
        raise
    finally:
        await close(stream)

