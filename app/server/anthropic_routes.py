"""Anthropic's Messages API: POST /v1/messages, whole or streamed with its event types."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app.core.answer_stats import AnswerStats
from app.engine.protocol import Delta, Done, ToolCall
from app.server import sse
from app.server.anthropic_asks import messages_ask
from app.server.endpoint import client_of, guarded, read_body
from app.server.errors import Flavor, error_body
from app.server.runs import CLIENT_GONE, Event, close, collect, cut_short, opened, outcome_of
from app.service.api.api_answers import ApiAnswers, ApiRefused, Started


def stop_reason(stats: AnswerStats, calls: bool, stop_sequence: str | None) -> tuple[str, str | None]:
    """Anthropic's stop_reason and stop_sequence (which of the request's stop_sequences ended the
    answer: the official client reads it; null unless that is the reason)."""
    if cut_short(stats):
        return "max_tokens", None
    if calls:
        return "tool_use", None
    return ("end_turn", None) if stop_sequence is None else ("stop_sequence", stop_sequence)


def tool_use(call: ToolCall) -> dict[str, Any]:
    try:
        given = json.loads(call.arguments)
    except json.JSONDecodeError:
        given = None
    return {"type": "tool_use", "id": call.id, "name": call.name,
            "input": given if isinstance(given, dict) else {}}


def message_head(message_id: str, model: str) -> dict[str, Any]:
    return {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}


class AnthropicEndpoint:
    def __init__(self, answers: ApiAnswers) -> None:
        self._answers = answers

    def routes(self) -> list[Route]:
        return [Route("/v1/messages", self.create, methods=["POST"])]

    async def create(self, request: Request) -> Response:
        async def work() -> Response:
            asked = messages_ask(await read_body(request), client_of(request))
            message_id = sse.new_id("msg_")
            if asked.stream:
                started, stream = await opened(request, self._answers, asked.ask)
                return StreamingResponse(_events(request, message_id, started, stream),
                                         media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)
            got = await collect(request, self._answers, asked.ask)
            content: list[dict[str, Any]] = [{"type": "text", "text": got.text}] if got.text else []
            content += [tool_use(call) for call in got.calls]
            stats = got.stats
            reason, sequence = stop_reason(stats, bool(got.calls), got.stop_sequence)
            return JSONResponse({**message_head(message_id, got.started.model), "content": content,
                                 "stop_reason": reason, "stop_sequence": sequence,
                                 "usage": {"input_tokens": stats.prompt_tokens, "output_tokens": stats.tokens}})

        return await guarded(Flavor.ANTHROPIC, request, work)


async def _events(request: Request, message_id: str, started: Started,
                  stream: AsyncIterator[Event]) -> AsyncIterator[bytes]:
    """message_start, a content block per text run and per tool call, message_delta, message_stop."""
    outcome = outcome_of(request)
    blocks = 0
    text_open = False
    calls = False
    try:
        yield sse.event({"type": "message_start", "message": message_head(message_id, started.model)})
        async for event in stream:
            if isinstance(event, Delta) and event.tool_call is not None:
                if text_open:
                    yield sse.event({"type": "content_block_stop", "index": blocks - 1})
                    text_open = False
                calls = True
                block = {**tool_use(event.tool_call), "input": {}}
                yield sse.event({"type": "content_block_start", "index": blocks, "content_block": block})
                yield sse.event({"type": "content_block_delta", "index": blocks,
                                 "delta": {"type": "input_json_delta", "partial_json": event.tool_call.arguments}})
                yield sse.event({"type": "content_block_stop", "index": blocks})
                blocks += 1
            elif isinstance(event, Delta) and event.text and not event.thinking:
                if not text_open:
                    yield sse.event({"type": "content_block_start", "index": blocks,
                                     "content_block": {"type": "text", "text": ""}})
                    text_open, blocks = True, blocks + 1
                yield sse.event({"type": "content_block_delta", "index": blocks - 1,
                                 "delta": {"type": "text_delta", "text": event.text}})
            elif isinstance(event, Done):
                outcome.done(event.stats)
                if text_open:
                    yield sse.event({"type": "content_block_stop", "index": blocks - 1})
                    text_open = False
                reason, sequence = stop_reason(event.stats, calls, event.stop_sequence)
                yield sse.event({"type": "message_delta",
                                 "delta": {"stop_reason": reason, "stop_sequence": sequence},
                                 "usage": {"input_tokens": event.stats.prompt_tokens,
                                           "output_tokens": event.stats.tokens}})
                yield sse.event({"type": "message_stop"})
    except ApiRefused as refused:
        outcome.status = refused.status
        body = error_body(Flavor.ANTHROPIC, refused.status, refused.message)
        yield f"event: error\ndata: {sse.dumps(body)}\n\n".encode()
    except (asyncio.CancelledError, GeneratorExit):
        outcome.status = CLIENT_GONE
        raise
    finally:
        await close(stream)
