"""A server on 127.0.0.1 that speaks OpenAI's or Ollama's shape and misbehaves as a test says: errors, drops, silence.

A real ThreadingHTTPServer on port 0: what it streams goes over a real socket, so a connection it
closes mid-answer, or one the client hangs up, is what Kestrel meets on a network.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    """How the server behaves; a test may change it while the server runs.

    status / error: answer a chat with this status and error message (200: stream). words: the pieces
    streamed. drop_after: close the connection after that many pieces, with no end. silent: send the
    stream's head, then nothing until the client hangs up; silent_head: not even the head (Ollama loading a
    model). endless: a piece every delay_s until the
    client hangs up. list_status: the status of the list of models (401: a wrong key).
    """

    models: list[str] = field(default_factory=lambda: ["m"])
    ollama: bool = False
    status: int = 200
    error: str = ""
    list_status: int = 200
    words: list[str] = field(default_factory=lambda: ["Hello", " world"])
    drop_after: int | None = None
    silent: bool = False
    silent_head: bool = False
    endless: bool = False
    delay_s: float = 0.0
    # What it saw: each request's method and path, each body, the Authorization headers, and hang-ups.
    requests: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)
    hung_up: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script: Script

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._note(None)
        script = self.script
        if script.list_status != 200:
            self._json(script.list_status, {"error": "unauthorized" if script.list_status == 401 else "no"})
        elif self.path == "/v1/models" and not script.ollama:
            self._json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in script.models]})
        elif self.path == "/api/version" and script.ollama:
            self._json(200, {"version": "0.6.0"})
        elif self.path == "/api/tags" and script.ollama:
            self._json(200, {"models": [{"name": m, "model": m, "size": 1} for m in script.models]})
        else:
            self._json(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self._note(body)
        script = self.script
        if self.path == "/api/show" and script.ollama:
            if body.get("model") in script.models:
                self._json(200, {"model_info": {"llama.context_length": 8192}, "capabilities": ["completion", "tools"]})
            else:
                self._json(404, {"error": f"model '{body.get('model')}' not found"})
        elif self.path in ("/v1/chat/completions", "/api/chat"):
            self._chat(body)
        else:
            self._json(404, {"error": "not found"})

    def _note(self, body: dict[str, Any] | None) -> None:
        self.script.requests.append(f"{self.command} {self.path}")
        self.script.keys.append(self.headers.get("Authorization"))
        if body is not None:
            self.script.bodies.append(body)

    def _chat(self, body: dict[str, Any]) -> None:
        script = self.script
        if body.get("model") not in script.models:
            self._json(404, {"error": {"message": f"model {body.get('model')} not found"}})
            return
        if script.silent_head:
            self._wait_for_hang_up()
            return
        if script.status != 200:
            self._json(script.status, {"error": {"message": script.error}} if not script.ollama
                       else {"error": script.error})
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson" if script.ollama else "text/event-stream")
        self.send_header("Connection", "close")  # no length, no chunks: the body ends when the socket closes
        self.end_headers()
        self.close_connection = True
        try:
            self._stream()
        except (BrokenPipeError, ConnectionResetError):
            script.hung_up.set()

    def _stream(self) -> None:
        script = self.script
        if script.silent:
            self._wait_for_hang_up()
            return
        number = 0
        while script.endless or number < len(script.words):
            if script.drop_after is not None and number >= script.drop_after:
                return  # closed with no end: the answer was dropped
            word = script.words[number % len(script.words)]
            self._piece(word)
            number += 1
            time.sleep(script.delay_s)
        self._end(number)

    def _wait_for_hang_up(self) -> None:
        """Nothing more until the client goes: a read on this end sees its hang-up."""
        self.connection.settimeout(60)
        try:
            if self.connection.recv(1) == b"":
                self.script.hung_up.set()
        except ConnectionResetError:
            self.script.hung_up.set()
        self.close_connection = True

    def _piece(self, text: str) -> None:
        if self.script.ollama:
            line = json.dumps({"model": "m", "message": {"role": "assistant", "content": text}, "done": False}) + "\n"
        else:
            line = "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text},
                                                       "finish_reason": None}]}) + "\n\n"
        self.wfile.write(line.encode())
        self.wfile.flush()

    def _end(self, count: int) -> None:
        if self.script.ollama:
            end = json.dumps({"model": "m", "message": {"role": "assistant", "content": ""}, "done": True,
                              "done_reason": "stop", "eval_count": count, "eval_duration": count * 10_000_000,
                              "prompt_eval_count": 7}) + "\n"
        else:
            end = ("data: " + json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                                          "usage": {"prompt_tokens": 7, "completion_tokens": count}})
                   + "\n\ndata: [DONE]\n\n")
        self.wfile.write(end.encode())
        self.wfile.flush()

    def _json(self, status: int, data: Any) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def hostile_server(script: Script) -> Iterator[str]:
    """The server running in a thread; its base URL (http://127.0.0.1:PORT)."""
    handler = type("ScriptedHandler", (_Handler,), {"script": script})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
