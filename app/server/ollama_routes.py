"""Ollama's endpoints: /api/version, /api/tags, /api/ps, /api/show, /api/chat, /api/generate, /api/embed, /api/embeddings.

Over the same ApiAnswers as the OpenAI and Anthropic endpoints, so tools written for Ollama use
Kestrel unchanged; the gate's key rules hold for them as for every endpoint.
"""

from __future__ import annotations

import asyncio
import array
import json
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app.engine.protocol import Delta, Done
from app.server.endpoint import client_of, read_body
from app.server.ollama_asks import (OllamaAsked, chat_ask, embed_ask, embeddings_ask, generate_ask, model_name,
                                    read_off_loop)
from app.server.ollama_replies import (NDJSON, OLLAMA_VERSION, Clock, done_reason, error, guarded, line, now,
                                       running_entry, show, tag_entry, tool_call_entry)
from app.server.runs import CLIENT_GONE, Collected, Event, close, collect, opened, outcome_of, until_gone
from app.service.api.api_answers import ApiAnswers, ApiModel, ApiRefused, EmbeddingAsk, Embeddings, Started

# How an answer's text goes in each endpoint's lines: /api/chat's message.content, /api/generate's response.
Piece = Callable[[dict[str, Any]], dict[str, Any]]


def _vectors(got: Embeddings) -> list[list[float]]:
    rows = []
    for row in got.rows:
        numbers = array.array("f", row)
        if sys.byteorder != "little":
            numbers.byteswap()
        rows.append(numbers.tolist())
    return rows


class OllamaEndpoints:
    """The handlers, over the service's ApiAnswers."""

    def __init__(self, answers: ApiAnswers) -> None:
        self._answers = answers

    def routes(self) -> list[Route]:
        return [Route("/api/version", self.version, methods=["GET"]),
                Route("/api/tags", self.tags, methods=["GET"]),
                Route("/api/ps", self.running, methods=["GET"]),
                Route("/api/show", self.show, methods=["POST"]),
                Route("/api/chat", self.chat, methods=["POST"]),
                Route("/api/generate", self.generate, methods=["POST"]),
                Route("/api/embed", self.embed, methods=["POST"]),
                Route("/api/embeddings", self.embeddings, methods=["POST"])]

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": OLLAMA_VERSION})

    async def tags(self, request: Request) -> Response:
        models = await self._answers.models(described=True)
        return JSONResponse({"models": [tag_entry(model) for model in models]})

    async def running(self, request: Request) -> Response:
        models = await self._answers.models(described=True)
        return JSONResponse({"models": [running_entry(model) for model in models if model.loaded]})

    async def show(self, request: Request) -> Response:
        async def work() -> Response:
            body = await read_body(request)
            wanted = model_name(body)
            if not wanted:
                raise body.missing("model", "the name of a model (GET /api/tags lists them)")
            return JSONResponse(show(await self._model(wanted)))

        return await guarded(request, work)

    async def _model(self, wanted: str) -> ApiModel:
        models = await self._answers.models(described=True)
        found = next((m for m in models if m.id == wanted), None) or next(
            (m for m in models if m.name.casefold() == wanted.casefold()), None)
        if found is None:
            raise ApiRefused(404, f"model '{wanted}' not found: it is not installed in Kestrel. GET /api/tags lists "
                                  "the ones that are; add others in Kestrel's model manager.")
        return found

    async def chat(self, request: Request) -> Response:
        async def work() -> Response:
            body = await read_body(request)
            asked = await read_off_loop(chat_ask, body, client_of(request))
            if not asked.ask.messages:  # Ollama's way to load a model: answered at once
                return await self._loaded(request, asked.ask.model, {"message": {"role": "assistant", "content": ""}})
            return await self._answer(request, asked, chat_piece, _chat_whole)

        return await guarded(request, work)

    async def generate(self, request: Request) -> Response:
        async def work() -> Response:
            body = await read_body(request)
            asked = await read_off_loop(generate_ask, body, client_of(request))
            ask = asked.ask
            if ask.shape.prompt == "" or (ask.shape.prompt is None and not ask.messages[-1].content and not ask.images):
                return await self._loaded(request, ask.model, {"response": ""})
            return await self._answer(request, asked, generate_piece, _generate_whole)

        return await guarded(request, work)

    async def _loaded(self, request: Request, name: str | None, empty: dict[str, Any]) -> Response:
        """Ollama answers an empty request with done_reason "load" once the model is loaded; Kestrel
        loads it with the next real request, and says here only whether it is there."""
        model = (await self._model(name)).id if name else ""
        return JSONResponse({"model": model, "created_at": now(), **empty, "done": True, "done_reason": "load"})

    async def _answer(self, request: Request, asked: OllamaAsked, piece: Piece,
                      whole: Callable[[Collected, OllamaAsked], dict[str, Any]]) -> Response:
        clock = Clock()
        if asked.stream:
            started, stream = await opened(request, self._answers, asked.ask)
            clock.started()
            return StreamingResponse(_lines(request, asked, started, stream, piece, clock), media_type=NDJSON)
        got = await collect(request, self._answers, asked.ask)
        head = {"model": got.started.model, "created_at": now()}
        return JSONResponse({**head, **whole(got, asked), "done": True, "done_reason": done_reason(got.stats),
                             **clock.timings(got.stats)})

    async def embed(self, request: Request) -> Response:
        async def work() -> Response:
            clock = Clock()
            ask = embed_ask(await read_body(request), client_of(request))
            got = await self._embedded(request, ask)
            # The JSON of many vectors takes seconds to write: on a worker thread, not the server's (the
            # window's) loop, as /v1/embeddings does.
            head = {"model": got.model, "total_duration": clock.elapsed(), "load_duration": 0,
                    "prompt_eval_count": got.prompt_tokens}
            body = await asyncio.to_thread(lambda: json.dumps({**head, "embeddings": _vectors(got)}).encode("utf-8"))
            return Response(body, media_type="application/json")

        return await guarded(request, work)

    async def embeddings(self, request: Request) -> Response:
        async def work() -> Response:
            ask = embeddings_ask(await read_body(request), client_of(request))
            if ask is None:
                return JSONResponse({"embedding": []})
            got = await self._embedded(request, ask)
            body = await asyncio.to_thread(lambda: json.dumps({"embedding": _vectors(got)[0]}).encode("utf-8"))
            return Response(body, media_type="application/json")

        return await guarded(request, work)

    async def _embedded(self, request: Request, ask: EmbeddingAsk) -> Embeddings:
        got = await until_gone(request, self._answers.embed(ask))
        outcome = outcome_of(request)
        outcome.model, outcome.prompt_tokens = got.model, got.prompt_tokens
        return got


def chat_piece(fields: dict[str, Any]) -> dict[str, Any]:
    return {"message": {"role": "assistant", "content": "", **fields}}


def generate_piece(fields: dict[str, Any]) -> dict[str, Any]:
    found = {"response": fields.get("content", "")}
    if "thinking" in fields:
        found["thinking"] = fields["thinking"]
    return found


def _chat_whole(got: Collected, asked: OllamaAsked) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": got.text}
    if got.thinking and asked.thinking:
        message["thinking"] = got.thinking
    if got.calls:
        message["tool_calls"] = [tool_call_entry(call) for call in got.calls]
    return {"message": message}


def _generate_whole(got: Collected, asked: OllamaAsked) -> dict[str, Any]:
    found: dict[str, Any] = {"response": got.text}
    if got.thinking and asked.thinking:
        found["thinking"] = got.thinking
    return found


async def _lines(request: Request, asked: OllamaAsked, started: Started, stream: AsyncIterator[Event],
                 piece: Piece, clock: Clock) -> AsyncIterator[bytes]:
    """The answer as NDJSON lines, the way the official client reads them; a failure is an {"error"} line."""
    outcome = outcome_of(request)
    head = {"model": started.model}
    try:
        async for event in stream:
            if isinstance(event, Delta) and event.tool_call is not None:
                yield line({**head, "created_at": now(), **piece({"tool_calls": [tool_call_entry(event.tool_call)]}),
                            "done": False})
            elif isinstance(event, Delta) and event.text and (asked.thinking or not event.thinking):
                fields = {"thinking": event.text} if event.thinking else {"content": event.text}
                yield line({**head, "created_at": now(), **piece(fields), "done": False})
            elif isinstance(event, Done):
                outcome.done(event.stats)
                yield line({**head, "created_at": now(), **piece({}), "done": True,
                            "done_reason": done_reason(event.stats), **clock.timings(event.stats)})
    except ApiRefused as refused:  # the engine failed mid-answer
        outcome.status = refused.status
        yield line({"error": refused.message})
    except (asyncio.CancelledError, GeneratorExit):  # the client went away
        outcome.status = CLIENT_GONE
        raise
    finally:
        await close(stream)


__all__ = ["OllamaEndpoints", "error"]
