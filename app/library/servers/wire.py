"""HTTP to an added server with the standard library: a request with bounded waits, its lines as they stream, and hanging up.

Every failure becomes a ServerFault naming the server. A connection that cannot be made in
CONNECT_S is a server that is not on (DOWN); one made that then says nothing for the server's wait
is SLOW; a stream that ends before its end marker is DROPPED (the caller knows the marker).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.library.servers.faults import ServerFacts, ServerFault, ServerTrouble
from app.library.servers.records import AddedServer, ServerKind

CONNECT_S = 5.0  # a server on this PC or the LAN connects in well under a second; a computer that is off never does
LIST_WAIT_S = 20.0  # listing models (Ollama reads each model's file for /api/show)
MAX_JSON_BYTES = 16 * 1024 * 1024  # a list of models, a non-streamed reply
MAX_LINE_BYTES = 4 * 1024 * 1024  # one streamed line (SSE data, an NDJSON object)
MAX_ERROR_BYTES = 8192
DETAIL_CHARS = 300
ANTHROPIC_VERSION = "2023-06-01"  # the Messages API's first version: the shapes read here, known to every compatible server


@dataclass(frozen=True)
class Asking:
    """Whom a request goes to and as whom: the server, its key (None: none), how long to wait for its words."""

    server: AddedServer
    key: str | None
    wait_s: float
    model: str = ""  # the model asked about, for the words of a 404

    def facts(self, trouble: ServerTrouble, *, status: int = 0, detail: str = "") -> ServerFacts:
        return ServerFacts(self.server.name, self.server.url, trouble, status, detail[:DETAIL_CHARS],
                           self.wait_s if trouble == ServerTrouble.SLOW else 0.0, self.model,
                           self.key is not None, self.server.kind.described, bool(self.server.pin))

    def fault(self, trouble: ServerTrouble, *, status: int = 0, detail: str = "") -> ServerFault:
        return ServerFault(self.facts(trouble, status=status, detail=detail))


class HangUp:
    """Closes one request's connection from another thread (Stop), whether its answer's head came yet or not."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._asked = False

    @property
    def asked(self) -> bool:
        return self._asked

    def attach(self, sock: socket.socket | None) -> None:
        """The request's socket, once connected (hung up at once when Stop came first)."""
        with self._lock:
            self._sock = sock
            if self._asked:
                _shut(sock)

    def now(self) -> None:
        with self._lock:
            self._asked = True
            _shut(self._sock)


def _shut(sock: socket.socket | None) -> None:
    # shutdown, not close: a read blocked in another thread on this socket returns at once.
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Exchange:
    """One request's response, open: its lines as they come, and hang_up() from any thread."""

    def __init__(self, asking: Asking, connection: http.client.HTTPConnection, response: http.client.HTTPResponse,
                 hang_up: HangUp) -> None:
        self._asking = asking
        self._connection = connection
        self.response = response
        self._hang_up = hang_up

    @property
    def hung_up(self) -> bool:
        return self._hang_up.asked

    def lines(self) -> Iterator[bytes]:
        """Each line of the body, without its line end, empty ones included; ends at the body's end.

        ServerFault: SLOW when the server says nothing for its wait, DROPPED when the connection breaks
        (a chunked body cut off too). After hang_up() it ends quietly."""
        while True:
            try:
                line = self.response.readline(MAX_LINE_BYTES + 1)
            except (TimeoutError, socket.timeout):
                if self.hung_up:
                    return
                raise self._asking.fault(ServerTrouble.SLOW) from None
            except (http.client.HTTPException, OSError, ValueError) as exc:
                if self.hung_up:
                    return
                raise self._asking.fault(ServerTrouble.DROPPED, detail=_why(exc)) from None
            if not line:
                return
            if len(line) > MAX_LINE_BYTES:
                raise self._asking.fault(ServerTrouble.BAD_ANSWER, detail="it sent a line of more than 4 MiB")
            yield line.rstrip(b"\r\n")

    def json(self) -> Any:
        """The whole body read as JSON (bounded); ServerFault when it is not JSON or does not come."""
        try:
            body = self.response.read(MAX_JSON_BYTES + 1)
        except (TimeoutError, socket.timeout):
            raise self._asking.fault(ServerTrouble.SLOW) from None
        except (http.client.HTTPException, OSError) as exc:
            raise self._asking.fault(ServerTrouble.DROPPED, detail=_why(exc)) from None
        if len(body) > MAX_JSON_BYTES:
            raise self._asking.fault(ServerTrouble.BAD_ANSWER, detail="its answer is larger than 16 MiB")
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise self._asking.fault(ServerTrouble.BAD_ANSWER, detail="its answer is not JSON") from None

    def close(self) -> None:
        self.response.close()
        self._connection.close()


def send(asking: Asking, method: str, path: str, body: Any = None, *,
         missing: ServerTrouble = ServerTrouble.NOT_FOUND, hang_up: HangUp | None = None) -> Exchange:
    """Send a request to the server's endpoint (AddedServer.api_url(path)) and wait for its answer's head.

    A 2xx gives the open Exchange; anything else is a ServerFault: 401/403 KEY, 404 `missing` (a model
    gone, or an address that is not the API), 5xx SERVER_ERROR, another 4xx REFUSED, with the server's
    own message. hang_up: Stop's way to close the connection from another thread (a fault it causes is the
    caller's to tell from the server's: HangUp.asked)."""
    hang_up = hang_up or HangUp()
    url = asking.server.api_url(path)
    parts = urlsplit(url)
    connection = _connection(parts.scheme, parts.hostname or "", parts.port, asking.server.pin)
    try:
        _connect(asking, connection)
        headers = {"Accept": "application/json, text/event-stream, application/x-ndjson",
                   "User-Agent": "Kestrel"}
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if asking.key:
            headers["Authorization"] = f"Bearer {asking.key}"
        if asking.server.kind == ServerKind.ANTHROPIC:
            # Anthropic's API takes the version the request is written in; its key in x-api-key, which every
            # Anthropic-compatible server reads (Anthropic's own client of late sends the Bearer header too).
            headers["anthropic-version"] = ANTHROPIC_VERSION
            if asking.key:
                headers["x-api-key"] = asking.key
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        # Kept apart: a response that closes the connection at its end takes the socket from the connection.
        hang_up.attach(connection.sock)
        try:
            connection.request(method, target, body=data, headers=headers)
            response = connection.getresponse()
        except (TimeoutError, socket.timeout):
            raise asking.fault(ServerTrouble.SLOW) from None
        except (http.client.HTTPException, OSError) as exc:
            raise asking.fault(ServerTrouble.DROPPED, detail=_why(exc)) from None
        if not 200 <= response.status < 300:
            raise _refusal(asking, response, missing)
        return Exchange(asking, connection, response, hang_up)
    except BaseException:
        connection.close()
        raise


def get_json(asking: Asking, path: str, body: Any = None, *,
             missing: ServerTrouble = ServerTrouble.NOT_FOUND) -> Any:
    """GET (or POST, with a body) one endpoint and read its JSON answer."""
    exchange = send(asking, "POST" if body is not None else "GET", path, body, missing=missing)
    try:
        return exchange.json()
    finally:
        exchange.close()


def _connection(scheme: str, host: str, port: int | None, pin: str = "") -> http.client.HTTPConnection:
    if scheme == "https":
        context = pinned_context() if pin else ssl.create_default_context()
        return http.client.HTTPSConnection(host, port, timeout=CONNECT_S, context=context)
    return http.client.HTTPConnection(host, port, timeout=CONNECT_S)


def pinned_context() -> ssl.SSLContext:
    """TLS that takes any certificate, for a caller that checks the certificate's fingerprint itself
    (a pin, or a pairing code's check): a paired Kestrel's certificate is its own, signed by no authority."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def peer_fingerprint(connection: http.client.HTTPConnection) -> str:
    """The SHA-256 fingerprint (hex) of the certificate a connected TLS connection was shown; "" for none."""
    sock = connection.sock
    der = sock.getpeercert(binary_form=True) if isinstance(sock, ssl.SSLSocket) else None
    return hashlib.sha256(der).hexdigest() if der else ""


def _connect(asking: Asking, connection: http.client.HTTPConnection) -> None:
    """Connect within CONNECT_S (checking a paired Kestrel's pin), then wait up to the server's wait for each
    of its words."""
    try:
        connection.connect()
    except ssl.SSLError as exc:
        raise asking.fault(ServerTrouble.TLS, detail=_why(exc)) from None
    except socket.gaierror:
        raise asking.fault(ServerTrouble.DOWN, detail="its name was not found") from None
    except (TimeoutError, socket.timeout):
        raise asking.fault(ServerTrouble.DOWN, detail=f"nothing answered within {CONNECT_S:.0f} s") from None
    except ConnectionRefusedError:
        raise asking.fault(ServerTrouble.DOWN, detail="the connection was refused") from None
    except OSError as exc:
        raise asking.fault(ServerTrouble.DOWN, detail=_why(exc)) from None
    pin = asking.server.pin
    if pin and not hmac.compare_digest(peer_fingerprint(connection), pin):
        raise asking.fault(ServerTrouble.CERT_CHANGED)
    if connection.sock is not None:
        connection.sock.settimeout(asking.wait_s)


def _refusal(asking: Asking, response: http.client.HTTPResponse, missing: ServerTrouble) -> ServerFault:
    status = response.status
    try:
        said = _said(response.read(MAX_ERROR_BYTES))
    except (http.client.HTTPException, OSError):
        said = ""
    if status in (401, 403):
        return asking.fault(ServerTrouble.KEY, status=status, detail=said)
    if status in (404, 410):
        return asking.fault(missing, status=status, detail=said)
    if status >= 500:
        return asking.fault(ServerTrouble.SERVER_ERROR, status=status, detail=said)
    return asking.fault(ServerTrouble.REFUSED, status=status, detail=said or response.reason)


def _said(body: bytes) -> str:
    """The server's own message from an error body: OpenAI's error.message, Ollama's error, or the text."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return " ".join(text.split())[:DETAIL_CHARS]
    return error_message(data) or ""


def error_message(data: Any) -> str | None:
    """The message of an error object as OpenAI ({"error": {"message"}}), Anthropic ({"type": "error", "error":
    {"type", "message"}}) or Ollama ({"error": "…"}) writes it."""
    if not isinstance(data, dict) or "error" not in data:
        return None
    error = data["error"]
    if isinstance(error, dict):
        error = error.get("message") or error.get("type") or json.dumps(error)
    return " ".join(str(error).split())[:DETAIL_CHARS]


def _why(exc: BaseException) -> str:
    if isinstance(exc, http.client.IncompleteRead):
        return "the answer was cut off"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
