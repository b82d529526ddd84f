"""One spawned child process that handles one item at a time under a time limit and a memory cap.

The reader (reader_worker.ReaderPool) and the image check (image_worker.ImageChecker) are both
built on it: the parent side (`LimitedChild`: start with a "ready" handshake, send an item, wait
for its answer within a time, tell a crash from a hang, kill, close, and the kill at exit) and
the child side (`serve`: Ctrl+C ignored, memory capped, gone with its parent, lower priority).
Each caller keeps its own words: this module says what happened, never to a user.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Generic, TypeVar

T = TypeVar("T")
# How long a started child may take to say it is ready (an interpreter start and imports).
START_S = 60.0
# Children still running when the interpreter exits: killed, not waited for.
_open_children: "weakref.WeakSet[LimitedChild[Any]]" = weakref.WeakSet()


@atexit.register
def _kill_children_left_running() -> None:
    for child in list(_open_children):
        child.close()


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
    first item and again after one was killed or crashed. One caller thread at a time."""

    def __init__(self, target: Callable[..., None], args: tuple[Any, ...], *, name: str, role: str,
                 start_s: float = START_S) -> None:
        self._target, self._args, self._name, self._role = target, args, name, role
        self._start_s = start_s
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self.restarts = 0  # children started again after one was killed, crashed or closed
        _open_children.add(self)

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
        if self._conn is not None and self._process is not None and self._process.is_alive():
            try:
                self._conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self._process.join(timeout=2)
        self._kill()

    def _started(self) -> Connection:
        if self._conn is not None and self._process is not None and self._process.is_alive():
            return self._conn
        if self._process is not None:
            self.restarts += 1
            self._kill()
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        process = ctx.Process(target=self._target, args=(child, *self._args), name=self._name, daemon=True)
        process.start()
        child.close()
        self._process, self._conn = process, parent
        try:  # a child that died while starting closes its end: poll() is True, recv() raises EOFError
            ready = parent.poll(self._start_s) and parent.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self._kill()
            raise RuntimeError(f"the {self._role} process did not start")
        return parent

    def _died(self) -> Died:
        process = self._process
        if process is not None:
            process.join(timeout=5)
        code = process.exitcode if process is not None else None
        self._kill()
        how = f"exit status {code}"
        if code is not None and code < 0:
            try:
                how = f"signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"signal {-code}"
        return Died(how)

    def _kill(self) -> None:
        process, conn = self._process, self._conn
        self._conn = None  # the process is kept: the next start counts as a restart
        if process is not None and process.is_alive():
            process.kill()
            process.join(timeout=5)
        if conn is not None:
            conn.close()


def serve(conn: Connection, memory_bytes: int, handle: Callable[[Any], object],
          on_memory_error: Callable[[Any], object],
          on_error: Callable[[Any, Exception], object] | None = None) -> None:
    """The child's loop: an item in, handle(item) out, until None or the pipe closes.

    A MemoryError becomes on_memory_error(item); another exception becomes on_error(item, exc),
    or, without on_error, ends the child (the parent sees it die)."""
    # Ctrl+C in a terminal reaches the whole process group; the parent decides when this ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cap_memory(memory_bytes)
    exit_with_parent()
    lower_priority()
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


def cap_memory(limit: int) -> None:
    """RLIMIT_AS on Linux and macOS: an allocation past the cap fails (MemoryError, or the parser
    dies), instead of the machine swapping. Windows would need a job object: not done yet."""
    if sys.platform == "win32":
        return
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        pass  # macOS refuses some values; the time limit still stands


def exit_with_parent() -> None:
    """A child stuck in a parser never reads its pipe's end: this thread ends it when its parent
    is gone (killed without its atexit handlers running)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def lower_priority() -> None:
    """Work in a child runs beside chat: it gives way to the engine and the window on a busy machine."""
    if hasattr(os, "nice"):
        try:
            os.nice(5)
        except OSError:
            pass
