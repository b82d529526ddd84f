"""One engine child process, its pipe and the thread that reads it, for EngineClient."""

from __future__ import annotations

import asyncio
import atexit
import multiprocessing
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable

from app.engine import protocol as p
from app.engine.failures import During, EngineStopped, Hang
from app.engine.process import HardwareSource, engine_main
from app.service.models.pipe_writer import PipeWriter


@dataclass(frozen=True)
class PipeClosed:
    """Posted to every waiting request when the engine's pipe closes."""

    exit_code: int | None
    hang: Hang | None = None  # why Kestrel ended it, when it did
    silent_s: float = 0.0

    def stopped(self, during: During) -> EngineStopped:
        return EngineStopped(self.exit_code, during, self.hang, self.silent_s)


@dataclass(frozen=True)
class NotSent:
    """Posted for a request that could not be pickled (a bug in what was asked)."""

    request_id: int
    cause: Exception


# What the reader and writer threads hand the event loop.
Delivered = p.EngineEvent | PipeClosed | NotSent
# Engines still running when the interpreter exits are killed first: multiprocessing's
# own exit handler would SIGTERM and then wait for them, for ever if one is stopped or
# hung. (atexit runs handlers last-registered first, so this runs before it.)
_running_engines: "weakref.WeakSet[EngineProcess]" = weakref.WeakSet()


@atexit.register
def _kill_engines_left_running() -> None:
    for engine in list(_running_engines):
        if engine.process.is_alive():
            engine.process.kill()


class EngineProcess:
    """One engine child process, its pipe, the thread that reads it and the one that writes it.

    send() returns at once (app/service/models/pipe_writer.py). A write that fails while the child's
    end is still open ends the child, so the reader thread always sees the pipe close and
    posts PipeClosed: every request waiting then ends with it, as when the engine dies.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, deliver: Callable[[EngineProcess, Delivered], None],
                 hardware: HardwareSource | None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=engine_main, args=(child, hardware), name="kestrel-engine",
                                   daemon=True)
        self.process.start()
        _running_engines.add(self)
        child.close()
        self.alive = True
        # Set by the reader thread on every message, and on every answered ping (an
        # answer to a ping sent after Stop proves the engine is alive now, where text
        # already in the pipe does not); read by the watchdog.
        self.last_heard = time.monotonic()
        self.last_ping_answered = 0
        self.hang: Hang | None = None
        self.silent_s = 0.0
        self._loop = loop
        self._deliver = deliver
        self._reader = threading.Thread(target=self._read, name="engine-client-reader", daemon=True)
        self._reader.start()
        self._writer = PipeWriter(self.conn, on_broken=self._write_failed, on_unsendable=self._unsendable,
                                  name="engine-client-writer")

    def send(self, message: p.Request) -> None:
        """Queue message for the engine, after everything sent before it.

        Raises BrokenPipeError once a write has failed or the engine was killed."""
        self._writer.send(message)

    def _write_failed(self, error: OSError) -> None:
        # A broken or reset pipe means the child's end is closed: the reader sees it too.
        # Any other failed write leaves an engine nobody can reach: end it, so that the
        # reader's PipeClosed ends the requests either way.
        if not isinstance(error, (BrokenPipeError, ConnectionResetError)) and self.process.is_alive():
            self.process.kill()

    def _unsendable(self, message: p.Request, error: Exception) -> None:
        self._post(NotSent(message.request_id, error))

    def _read(self) -> None:
        # A thread, not loop.add_reader: Windows' proactor loops cannot watch a pipe.
        while True:
            try:
                event: p.EngineEvent = self.conn.recv()
            except (EOFError, OSError):
                break
            self.last_heard = time.monotonic()
            if isinstance(event, p.Ack) and event.what == p.AckKind.PING:
                self.last_ping_answered = event.request_id
            if not self._post(event):
                return
        self.process.join(timeout=2)
        self._post(PipeClosed(self.process.exitcode, self.hang, self.silent_s))

    def _post(self, event: Delivered) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._deliver, self, event)
            return True
        except RuntimeError:  # The loop is closed: nobody is listening any more.
            return False

    def kill(self) -> None:
        self._writer.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        # The reader sees the pipe end (EOFError) once the child is gone; closing the pipe
        # under it while it reads would hand recv() a closed handle (a TypeError in its thread).
        # The writer's writes fail at once then (nothing reads them), and it ends.
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=3)
        self._writer.join(timeout=3)
        self.conn.close()

    def end_hung(self, hang: Hang, silent_s: float = 0.0) -> None:
        """End an engine that stopped answering (SIGKILL works on a stopped process too);
        the reader thread then reports it as died, with why."""
        self.hang, self.silent_s = hang, silent_s
        if self.process.is_alive():
            self.process.kill()
