"""Server-sent events as OpenAI's and Anthropic's streams write them."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any

# Each answer gets a streaming response with these: no proxy or browser may buffer or cache it.
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
MEDIA_TYPE = "text/event-stream"
DONE = b"data: [DONE]\n\n"


def dumps(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def data(value: Mapping[str, Any]) -> bytes:
    """One `data:` event (OpenAI Chat Completions and Completions)."""
    return f"data: {dumps(value)}\n\n".encode()


def event(value: Mapping[str, Any]) -> bytes:
    """One named event, named by its own type (Anthropic Messages, OpenAI Responses)."""
    return f"event: {value['type']}\ndata: {dumps(value)}\n\n".encode()


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"
