"""Requests to the API server as a hostile client writes them: raw http.client, any header, any
body; and the two providers' error shapes, checked whole."""

from __future__ import annotations

import http.client
import json
import socket
import time
from typing import Any

from tests.server.helpers import KEY

HELLO = [{"role": "user", "content": "Hello"}]
CHAT = json.dumps({"messages": HELLO}).encode()
MESSAGES = json.dumps({"model": "tiny", "max_tokens": 8, "messages": HELLO}).encode()
JSON = {"Content-Type": "application/json"}
OPENAI_KEY = {"Authorization": f"Bearer {KEY}"}
ANTHROPIC_KEY = {"x-api-key": KEY}


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def raw(address: str, method: str, path: str, headers: dict[str, str] | None = None,
        body: bytes | None = None, timeout: float = 60) -> tuple[int, Any, http.client.HTTPResponse]:
    """One request as written (http.client sends the Host given, or 127.0.0.1:port); its status and
    body (JSON where it is JSON)."""
    connection = http.client.HTTPConnection("127.0.0.1", port_of(address), timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        reply = connection.getresponse()
        data = reply.read()
    finally:
        connection.close()
    try:
        return reply.status, json.loads(data), reply
    except ValueError:
        return reply.status, data.decode("utf-8", "replace"), reply


def head_only(port: int, head: bytes) -> socket.socket:
    """A connection that sends `head` (a request's start) and nothing more."""
    held = socket.create_connection(("127.0.0.1", port))
    held.sendall(head)
    return held


def answered_within(address: str, limit_s: float, key: str = KEY) -> float | None:
    """Seconds until GET /v1/models answers 200 on a new connection, tried every half second."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        try:
            status, _, _ = raw(address, "GET", "/v1/models", {"Authorization": f"Bearer {key}"}, timeout=10)
            if status == 200:
                return time.monotonic() - started
        except (OSError, http.client.HTTPException):
            pass  # turned away, or not accepted yet, while held connections fill the server
        time.sleep(0.5)
    return None


def openai_error(body: Any) -> dict[str, Any]:
    """The error of an OpenAI-shaped error body, with exactly OpenAI's fields."""
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    return error


def anthropic_error(body: Any) -> dict[str, Any]:
    """The error of an Anthropic-shaped error body, with exactly Anthropic's fields."""
    assert isinstance(body, dict) and body.get("type") == "error", body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"type", "message"}, error
    return error
