"""OpenAI's Responses API, stateless: POST /v1/responses with its streaming events."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app.core.answer_stats import AnswerStats
from app.engine.protocol import Delta, Done
from app.server import sse
from app.server.endpoint import client_of, guarded, read_body
from app.server.errors import Flavor, refused_code
from app.server.openai_asks import Asked, read_off_loop, responses_ask
from app.server.runs import CLIENT_GONE, Event, close, collect, cut_short, opened, outcome_of
from app.service.api.api_answers import ApiAnswers, ApiRefused


class ResponseDraft:
    """One response object as it grows: its ids, the request's settings, and the text so far."""

    def __init__(self, asked: Asked, model: str) -> None:
        self.id = sse.new_id("resp_")
        self.item_id = sse.new_id("msg_")
        self.created = int(time.time())
        self.model = model
        self.settings = asked.ask.settings
        self.text = ""

    def message(self, status: str) -> dict[str, Any]:
        content = [] if status == "in_progress" else [self.part()]
        return {"type": "message", "id": self.item_id, "status": status, "role": "assistant", "content": content}

    def part(self) -> dict[str, Any]:
        return {"type": "output_text", "text": self.text, "annotations": [], "logprobs": []}

    def response(self, stats: AnswerStats | None = None, *, failed: dict[str, str] | None = None) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        if failed is not None:
            status = "failed"
        elif stats is None:
            status = "in_progress"
        else:
            status, output = ("incomplete" if cut_short(stats) else "completed"), [self.message("completed")]
        body: dict[str, Any] = {
            "id": self.id, "object": "response", "created_at": self.created, "status": status,
            "model": self.model, "output": output, "error": failed,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": None, "max_output_tokens": self.settings.get("max_tokens"),
            "temperature": self.settings.get("temperature"), "top_p": self.settings.get("top_p"),
            "parallel_tool_calls": False, "tool_choice": "auto", "tools": [], "metadata": {},
            "text": {"format": {"type": "text"}}, "usage": None,
        }
        if stats is not None:
            body["usage"] = {"input_tokens": stats.prompt_tokens, "output_tokens": stats.tokens,
                             "total_tokens": stats.prompt_tokens + stats.tokens,
                             "input_tokens_details": {"cached_tokens": 0},
                             "output_tokens_details": {"reasoning_tokens": 0}}
        return body


class ResponsesEndpoint:
    def __init__(self, answers: ApiAnswers) -> None:
        self._answers = answers

    def routes(self) -> list[Route]:
        return [Route("/v1/responses", self.create, methods=["POST"])]

    async def create(self, request: Request) -> Response:
        async def work() -> Response:
            asked = await read_off_loop(responses_ask, await read_body(request), client_of(request))
            if asked.stream:
                started, stream = await opened(request, self._answers, asked.ask)
                return StreamingResponse(_events(request, ResponseDraft(asked, started.model), stream),
                                         media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)
            got = await collect(request, self._answers, asked.ask)
            draft = ResponseDraft(asked, got.started.model)
            draft.text = got.text
            return JSONResponse(draft.response(got.stats))

        return await guarded(Flavor.OPENAI, request, work)


async def _events(request: Request, draft: ResponseDraft,
                  stream: AsyncIterator[Event]) -> AsyncIterator[bytes]:
    """response.created … response.output_text.delta … response.completed, numbered in order."""
    outcome = outcome_of(request)
    number = 0

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal number
        number += 1
        return sse.event({"type": kind, "sequence_number": number - 1, **fields})

    where = {"item_id": draft.item_id, "output_index": 0, "content_index": 0}
    try:
        yield event("response.created", response=draft.response())
        yield event("response.in_progress", response=draft.response())
        yield event("response.output_item.added", output_index=0, item=draft.message("in_progress"))
        yield event("response.content_part.added", **where, part=draft.part())
        async for item in stream:
            if isinstance(item, Delta) and item.text and not item.thinking and item.tool_call is None:
                draft.text += item.text
                yield event("response.output_text.delta", **where, delta=item.text, logprobs=[])
            elif isinstance(item, Done):
                outcome.done(item.stats)
                yield event("response.output_text.done", **where, text=draft.text, logprobs=[])
                yield event("response.content_part.done", **where, part=draft.part())
                yield event("response.output_item.done", output_index=0, item=draft.message("completed"))
                final = "response.incomplete" if cut_short(item.stats) else "response.completed"
                yield event(final, response=draft.response(item.stats))
    except ApiRefused as refused:
        outcome.status = refused.status
        failure = {"code": refused_code(refused) or "server_error", "message": refused.message}
        yield event("response.failed", response=draft.response(failed=failure))
    except (asyncio.CancelledError, GeneratorExit):
        outcome.status = CLIENT_GONE
        raise
    finally:
        await close(stream)
