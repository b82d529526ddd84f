"""ApiServer: the API server on the running asyncio loop, started and stopped by a front end.

uvicorn's h11 server runs on whatever loop calls start() (the window's qasync loop, or the
one `kestrel serve` runs), so it never owns the loop or its signals: Ctrl+C and the
window's quit stay with their owners. The socket is bound here before uvicorn sees it, so
start() knows at once whether the port is free, and nothing listens before start().
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp

from app.core.server_settings import LOOPBACK, ServerSettings, is_loopback
from app.server.connections import BACKLOG, OnceSaid, bounded_protocol, most_connections, quiet_accept_failures
from app.server.http_app import build_app
from app.server.gate import Gate
from app.service.api.api_answers import ApiAnswers

# What builds the application a server serves: the API (build_app), or the sharing server's (app/server/link).
AppBuilder = Callable[[ApiAnswers, Callable[[], ServerSettings]], tuple[ASGIApp, Gate]]

# How long stop() lets open requests end (their answers cancelled) before closing anyway.
STOP_GRACE_S = 3.0
# The longest start() waits for uvicorn to take the bound socket (it does so at once).
START_LIMIT_S = 10.0


class ServerState(StrEnum):
    OFF = "off"
    STARTING = "starting"
    ON = "on"
    FAILED = "failed"


class _LoopServer(uvicorn.Server):
    """uvicorn's server without its signal handlers: the loop's owner keeps Ctrl+C."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # Override uvicorn.Server.capture_signals.
        yield


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or OSError (the port taken, an address not on this PC)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        if sys.platform == "win32":
            # Windows' SO_REUSEADDR would let two programs share the port; this refuses a second one.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)  # type: ignore[attr-defined]
        else:  # a port just freed by a stop (TIME_WAIT) is free to use again
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def bind_words(host: str, port: int, exc: OSError) -> str:
    """Why the server could not listen, in words that say what to do."""
    if exc.errno == errno.EADDRINUSE or getattr(exc, "winerror", None) in (10048, 10013):
        return (f"Port {port} on {host} is already in use by another program. Choose another port, or close "
                "the program that uses it.")
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return (f"{host} is not an address of this PC, so the server cannot listen there. Use {LOOPBACK}, or "
                "one of this PC's own addresses.")
    if exc.errno == errno.EACCES:
        return (f"This user may not listen on port {port} (ports below 1024 need administrator rights). "
                "Choose a port from 1024 to 65535.")
    return f"The API server could not listen on {host}:{port}: {exc.strerror or exc}."


@dataclass(frozen=True)
class TlsFiles:
    """The certificate and private key a server speaks TLS with (PEM files)."""

    certificate: Path
    private_key: Path


def address_of(sock: socket.socket, host: str, scheme: str = "http") -> str:
    port = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


class ApiServer:
    """The API server's life: OFF -> STARTING -> ON (or FAILED, with its reason in `error`) -> OFF.

    settings is read at each start (host, port, CORS) and at each request (the key).
    on_change is called after every change of state, address, error or warning.
    build and tls: what the sharing server (app/server/link/sharing.py) serves, and its certificate.
    """

    def __init__(self, answers: ApiAnswers, settings: Callable[[], ServerSettings], *,
                 on_change: Callable[[], None] = lambda: None, build: AppBuilder = build_app,
                 tls: TlsFiles | None = None, beyond_words: str = "") -> None:
        self._answers = answers
        self._settings = settings
        self._on_change = on_change
        self._build = build
        self._tls = tls
        self._beyond_words = beyond_words or "other machines on the network can reach it (with the key)."
        self.state = ServerState.OFF
        self.address = ""
        self.error = ""
        self.warning = ""  # the server is reachable from other machines: the window and stderr say so
        self._server: _LoopServer | None = None
        self._serving: asyncio.Task[None] | None = None
        self._gate: Gate | None = None
        self._put_back: Callable[[], None] = lambda: None  # the loop's own exception handler

    def _set(self, state: ServerState, *, error: str = "", address: str = "", warning: str = "") -> None:
        self.state, self.error, self.address, self.warning = state, error, address, warning
        self._on_change()

    async def start(self) -> bool:
        """Listen and serve; True once requests are answered, False (FAILED, `error` says why) if not."""
        if self.state is ServerState.ON:
            return True
        settings = self._settings()
        self._set(ServerState.STARTING)
        host, port = settings.host.strip(), settings.port
        if not is_loopback(host) and not settings.listen_beyond_this_pc:
            self._set(ServerState.FAILED, error=f"{host} can be reached from other machines: turn on listening "
                                                f"beyond this PC to allow it, or use {LOOPBACK}.")
            return False
        try:
            sock = bind(host, port)
        except OSError as exc:
            self._set(ServerState.FAILED, error=bind_words(host, port, exc))
            return False
        app, self._gate = self._build(self._answers, self._settings)
        tls = self._tls
        said = OnceSaid()
        config = uvicorn.Config(app, loop="none", http=bounded_protocol(most_connections(), said), ws="none",
                                lifespan="off", log_config=None, access_log=False, server_header=False,
                                proxy_headers=False, timeout_graceful_shutdown=int(STOP_GRACE_S),
                                timeout_keep_alive=5, backlog=BACKLOG,
                                ssl_certfile=str(tls.certificate) if tls else None,
                                ssl_keyfile=str(tls.private_key) if tls else None)
        self._put_back = quiet_accept_failures(asyncio.get_running_loop(), said)
        self._server = server = _LoopServer(config)
        self._serving = asyncio.create_task(server.serve(sockets=[sock]), name="kestrel-api-server")
        async with asyncio.timeout(START_LIMIT_S):
            while not server.started and not self._serving.done():
                await asyncio.sleep(0.005)
        if not server.started:  # a bug: uvicorn refused a socket it was handed
            sock.close()
            self._serving.result()
            raise RuntimeError("uvicorn ended before it started serving")
        warning = "" if is_loopback(host) else f"The API server listens on {host}: {self._beyond_words}"
        if warning:
            print(f"kestrel: {warning}", file=sys.stderr, flush=True)
        self._set(ServerState.ON, address=address_of(sock, host, "https" if tls else "http"), warning=warning)
        return True

    async def stop(self) -> None:
        """Stop listening; requests still open end (a stream just stops, its answer cancelled)."""
        server, serving, gate = self._server, self._serving, self._gate
        self._server = self._serving = self._gate = None
        if server is not None and serving is not None and gate is not None:
            await gate.end_requests(STOP_GRACE_S)
            server.should_exit = True
            await serving
        self._put_back()
        self._put_back = lambda: None
        if self.state is not ServerState.OFF:
            self._set(ServerState.OFF)
