"""A loopback HTTP forwarder in front of a server that keeps every request it passed on (method, path, body)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

LIMIT_S = 240  # one request's net: a tiny model on 127.0.0.1 answers in well under it


class Forwarder(ThreadingHTTPServer):
    """A loopback server that passes each request on to `target` and keeps what it was asked (method, path, body)."""

    daemon_threads = True

    def __init__(self, target: str) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.target = target
        self.seen: list[tuple[str, str, bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def chat_bodies(self) -> list[dict[str, Any]]:
        return [json.loads(body) for method, path, body in self.seen if path.endswith("/chat/completions")]


@contextmanager
def forwarding(target: str) -> Iterator[Forwarder]:
    """A Forwarder to target, serving on a thread of its own until the block ends."""
    forwarder = Forwarder(target)
    threading.Thread(target=forwarder.serve_forever, name="forwarder", daemon=True).start()
    try:
        yield forwarder
    finally:
        forwarder.shutdown()
        forwarder.server_close()


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Forwarder

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def log_message(self, format: str, *args: object) -> None:
        """Override BaseHTTPRequestHandler.log_message: quiet."""

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append((self.command, self.path, body))
        target = urlsplit(self.server.target)
        connection = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=LIMIT_S)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
            connection.request(self.command, self.path, body or None, headers)
            answer = connection.getresponse()
            data = answer.read()  # whole: a stream's events come after one another all the same
        finally:
            connection.close()
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.getheader("Content-Type") or "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
