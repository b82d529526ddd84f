"""The API server's connections, bounded: a request's head must come in time, only so many stay
open, and running out of files is said once instead of logged on every try.

A client that opens connections and never finishes a request's head would otherwise hold a file
handle each for as long as the server runs: under macOS's default of 256 open files, 300 of
them left Kestrel unable to accept anyone (or to open its own files), while asyncio logged a
traceback for every failed accept, up to its backlog per try, each second.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

# The seconds a request's head (its first line and headers) may take to arrive once the
# connection is ready for one: a client sends it at once; one that never ends it is closed.
HEAD_LIMIT_S = 10.0
# The most connections kept open where the system sets no limit on open files (Windows).
MOST_CONNECTIONS = 512
# The connections waiting to be accepted; also how many accepts asyncio tries at a time.
BACKLOG = 128
# How asyncio says an accept failed for want of files (EMFILE, ENFILE) or memory.
ACCEPT_FAILED = "socket.accept() out of system resource"


def most_connections() -> int:
    """The connections kept open: half the process's open-file limit (at most MOST_CONNECTIONS),
    so that the rest of Kestrel (the engine's pipes, the history, the logs) keeps files to open."""
    if sys.platform == "win32":
        return MOST_CONNECTIONS
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MOST_CONNECTIONS
    return max(8, min(MOST_CONNECTIONS, soft // 2))


class OnceSaid:
    """Says each thing once per server run, on stderr (where `kestrel serve` reports)."""

    def __init__(self) -> None:
        self._said: set[str] = set()

    def __call__(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            print(f"kestrel: {text}", file=sys.stderr, flush=True)


class BoundedH11(H11Protocol):
    """uvicorn's h11 connection, closed when a request's head does not come within HEAD_LIMIT_S,
    and turned away at once when `most` connections are open already."""

    most: ClassVar[int] = MOST_CONNECTIONS
    said: ClassVar[OnceSaid] = OnceSaid()  # bounded_protocol gives each server its own

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        """Override H11Protocol.connection_made."""
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        if len(self.connections) > self.most:
            self.said(f"The API server has {self.most:,} connections open, as many as it keeps; it turns new "
                     f"ones away until some close (a connection that sends no request within "
                     f"{HEAD_LIMIT_S:g} seconds is closed).")
            transport.close()  # connection_lost follows, and forgets it
            return
        self._await_head()

    def on_response_complete(self) -> None:
        """Override H11Protocol.on_response_complete: the next request's head gets its own time."""
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        """Override H11Protocol.connection_lost."""
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def _await_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(HEAD_LIMIT_S, self._head_late)

    def _head_late(self) -> None:
        self._head_timer = None
        # IDLE: no whole head since the connection became ready for one (nothing, or a part).
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def bounded_protocol(most: int, said: OnceSaid) -> type[asyncio.Protocol]:
    """The connection class of one server: at most `most` open, the turning away said by said."""

    class Bounded(BoundedH11):
        pass

    Bounded.most, Bounded.said = most, said
    return Bounded


def quiet_accept_failures(loop: asyncio.AbstractEventLoop, say: Callable[[str], None]) -> Callable[[], None]:
    """The loop's exception handler, with a failed accept (no files left) said once by say instead
    of logged with its traceback each time; returns what puts the loop's own handler back.

    The server keeps serving: asyncio tries to accept again a second later, and does once
    connections have closed."""
    previous = loop.get_exception_handler()

    def handle(running: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == ACCEPT_FAILED:
            say("The API server could not take a new connection: Kestrel has run out of open files. It takes new "
                "connections again as others close.")
        elif previous is not None:
            previous(running, context)
        else:
            running.default_exception_handler(context)

    loop.set_exception_handler(handle)

    def put_back() -> None:
        if loop.get_exception_handler() is handle:
            loop.set_exception_handler(previous)

    return put_back
