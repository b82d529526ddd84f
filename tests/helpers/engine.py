"""Helpers for tests that talk to a real engine through EngineClient."""

from __future__ import annotations

import asyncio
from typing import Sequence

from app.core.generation import GenerationSettings
from app.engine.protocol import ChatMessage, Delta, Done
from app.service.models.client import EngineClient
from app.service.models.engine_errors import EngineError


async def answer_parts(client: EngineClient, messages: Sequence[ChatMessage],
                       settings: GenerationSettings) -> tuple[list[str], Done]:
    """The streamed pieces of one answer and its Done event."""
    parts = []
    async for event in client.generate(messages, settings):
        if isinstance(event, Delta):
            parts.append(event.text)
        else:
            return parts, event
    raise AssertionError("the stream ended without Done")


async def answer(client: EngineClient, messages: Sequence[ChatMessage],
                 settings: GenerationSettings) -> tuple[str, Done]:
    """The text of one answer and its Done event."""
    parts, done = await answer_parts(client, messages, settings)
    return "".join(parts), done


def load_error(model_path, **load_options) -> EngineError:
    """Load a model that must be refused, in a fresh engine; return the refusal."""

    async def scenario() -> EngineError:
        client = EngineClient()
        try:
            await client.load(str(model_path), **load_options)
        except EngineError as refused:
            return refused
        finally:
            await client.shutdown()
        raise AssertionError(f"{model_path} was loaded, but should have been refused")

    return asyncio.run(asyncio.wait_for(scenario(), timeout=120))
