"""One spawned child process that handles one item at a time under a time limit and a memory cap.

The reader (reader_worker.ReaderPool) and the image check (image_worker.ImageChecker) are both
built on it: the parent side (`LimitedChild`: start with a "ready" handshake, send an item, wait
for its answer within a time, tell a crash from a hang, close) and the child side (`serve`: the
item loop). The process itself is the supervisor's (app/core/children): it starts the child with
Ctrl+C ignored, its memory capped and a lower priority, gone with Kestrel however Kestrel ends, and
ends it at Kestrel's exit if its owner has not. Each caller keeps its own words: this module says
what happened, never to a user.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Generic, TypeVar

from app.core.children.in_child import ChildLimits
from app.core.children.python_child import PythonChild, start_python_child

T = TypeVar("T")
# How long a started child may take to say it is ready (an interpreter start and imports).
START_S = 60.0
# How long a child asked to end (None over its pipe) may take before it is killed.
_CLOSE_S = 2.0
# How long a child whose pipe closed is given to exit, so its exit status can say how it ended.
_DIED_S = 5.0


@dataclass(frozen=True)
class Answered(Generic[T]):
    """The child answered in time."""

    value: T


@dataclass(frozen=True)
class TimedOut:
    """The child did not answer within the time given: it was killed."""


@dataclass(frozen=True)
class Died:
    """The child ended before answering; how: "exit status 1", "signal SIGKILL"."""

    how: str


class LimitedChild(Generic[T]):
    """A spawned child running target(conn, *args), which must call `serve`; started for the
    first item and again after one was killed or crashed. One caller thread at a time.
    memory_bytes: the child's memory cap (None: none)."""

    def __init__(self, target: Callable[..., None], args: tuple[Any, ...], *, name: str, role: str,
                 memory_bytes: int | None = None, start_s: float = START_S) -> None:
        self._target, self._args, self._name, self._role = target, args, name, role
        self._limits = ChildLimits(memory_bytes=memory_bytes, lower_priority=True, ignore_interrupt=True)
        self._start_s = start_s
        self._child: PythonChild | None = None
        self._conn: Connection | None = None
        self.restarts = 0  # children started again after one was killed, crashed or closed

    def ask(self, item: object, seconds: float) -> Answered[T] | TimedOut | Died:
        """Send item to the child and wait up to seconds for its answer. RuntimeError (naming
        the role) when a child cannot be started at all."""
        conn = self._started()
        try:
            conn.send(item)
        except (BrokenPipeError, OSError):
            return self._died()
        if conn.poll(seconds):
            try:
                value: T = conn.recv()
                return Answered(value)
            except (EOFError, OSError):
                return self._died()
        self._kill()
        return TimedOut()

    def close(self) -> None:
        """Stop the child: asked to end, then killed if it is in the middle of an item."""
        grace = 0.0
        if self._conn is not None and self._child is not None and self._child.is_alive():
            try:
                self._conn.send(None)
                grace = _CLOSE_S
            except (BrokenPipeError, OSError):
                pass
        self._kill(grace)

    def _started(self) -> Connection:
        if self._conn is not None and self._child is not None and self._child.is_alive():
            return self._conn
        if self._child is not None:
            self.restarts += 1
            self._kill()
        self._child, parent = start_python_child(self._target, self._args, name=self._name, limits=self._limits)
        self._conn = parent
        try:  # a child that died while starting closes its end: poll() is True, recv() raises EOFError
            ready = parent.poll(self._start_s) and parent.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self._kill()
            raise RuntimeError(f"the {self._role} process did not start")
        return parent

    def _died(self) -> Died:
        code = self._child.wait(_DIED_S) if self._child is not None else None
        self._kill()
        how = f"exit status {code}"
        if code is not None and code < 0:
            try:
                how = f"signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"signal {-code}"
        return Died(how)

    def _kill(self, grace_s: float = 0.0) -> None:
        child, conn = self._child, self._conn
        self._conn = None  # the child is kept: the next start counts as a restart
        if child is not None:
            child.end(grace_s)
        if conn is not None:
            conn.close()


def serve(conn: Connection, handle: Callable[[Any], object], on_memory_error: Callable[[Any], object],
          on_error: Callable[[Any, Exception], object] | None = None) -> None:
    """The child's loop: an item in, handle(item) out, until None or the pipe closes.

    A MemoryError becomes on_memory_error(item); another exception becomes on_error(item, exc),
    or, without on_error, ends the child (the parent sees it die)."""
    conn.send("ready")
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return
        if item is None:
            return
        try:
            result = handle(item)
        except MemoryError:
            result = on_memory_error(item)
        except Exception as exc:
            if on_error is None:
                raise
            result = on_error(item, exc)
        conn.send(result)
