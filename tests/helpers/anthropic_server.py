"""A server on 127.0.0.1 that answers in Anthropic's shapes as its documentation writes them, and misbehaves on cue.

The stream follows Anthropic's "Streaming Messages" page (docs.anthropic.com/en/api/messages-streaming):
message_start, a ping, a text block, a tool_use block whose input comes as two input_json_delta
fragments, message_delta with the stop reason and counts, message_stop. The official `anthropic`
client reads the same bytes (tests/engine/test_remote_anthropic.py), which is what makes the stream
a fair stand-in: not a recording of Anthropic's servers, which this machine cannot reach.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY = "sk-ant-test"


def events(text: list[str], call: tuple[str, str, list[str]] | None = None) -> list[dict[str, Any]]:
    """A message's events: the text in pieces, then (name, id, fragments of its input's JSON) as a tool_use block."""
    out: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                              "model": "claude-test", "stop_reason": None, "stop_sequence": None,
                                              "usage": {"input_tokens": 25, "output_tokens": 1}}},
        {"type": "ping"},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
    out += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
            for piece in text]
    out.append({"type": "content_block_stop", "index": 0})
    if call is not None:
        name, call_id, fragments = call
        out.append({"type": "content_block_start", "index": 1,
                    "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}})
        out += [{"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": part}}
                for part in fragments]
        out.append({"type": "content_block_stop", "index": 1})
    out.append({"type": "message_delta", "delta": {"stop_reason": "tool_use" if call else "end_turn",
                                                   "stop_sequence": None}, "usage": {"output_tokens": 15}})
    out.append({"type": "message_stop"})
    return out


@dataclass
class AnthropicScript:
    """What it answers: the events of /v1/messages (cut after `drop_after` of them, with no end), an error
    event after the first piece of text (`overloaded`), or a key it wants (401 in Anthropic's shape otherwise).
    What it saw: each request's method and path, headers and body."""

    streamed: list[dict[str, Any]] = field(default_factory=lambda: events(["Hello", " there"]))
    models: list[str] = field(default_factory=lambda: ["claude-test"])
    key: str = KEY
    drop_after: int | None = None
    overloaded: bool = False
    requests: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script: AnthropicScript

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _seen(self) -> bool:
        """Note the request; False (a 401 sent) when its key is not the one wanted."""
        self.script.requests.append(f"{self.command} {self.path}")
        self.script.headers.append({k.lower(): v for k, v in self.headers.items()})
        bearer = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        if self.script.key not in (self.headers.get("x-api-key"), bearer):  # Anthropic's client of late sends Bearer
            self._json(401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})
            return False
        return True

    def do_GET(self) -> None:
        if not self._seen():
            return
        if self.path.split("?")[0] != "/v1/models":
            self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}})
            return
        data = [{"type": "model", "id": m, "display_name": m, "created_at": "2026-01-01T00:00:00Z"}
                for m in self.script.models]
        self._json(200, {"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                         "last_id": data[-1]["id"] if data else None})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self._seen():
            return
        self.script.bodies.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        streamed = self.script.streamed
        for number, event in enumerate(streamed):
            if self.script.drop_after is not None and number >= self.script.drop_after:
                break
            self._event(event)
            if self.script.overloaded and event.get("type") == "content_block_delta":
                self._event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
                break
        self.close_connection = True

    def _event(self, event: dict[str, Any]) -> None:
        self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()

    def _json(self, status: int, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@contextmanager
def anthropic_server(script: AnthropicScript) -> Iterator[str]:
    """The server on a free port; its base URL."""
    handler = type("Handler", (_Handler,), {"script": script})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
