"""One engine child process, its pipe and the thread that reads it, for EngineClient."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Callable

from app.core.children.in_child import ChildLimits
from app.core.children.python_child import start_python_child
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


class EngineProcess:
    """One engine child process, its pipe, the thread that reads it and the one that writes it.

    send() returns at once (app/service/models/pipe_writer.py). A write that fails while the child's
    end is still open ends the child, so the reader thread always sees the pipe close and
    posts PipeClosed: every request waiting then ends with it, as when the engine dies.
    The process is the supervisor's (app/core/children): gone with Kestrel however Kestrel
    ends, and killed at Kestrel's exit if it is still running then.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, deliver: Callable[[EngineProcess, Delivered], None],
                 hardware: HardwareSource | None) -> None:
        # Ctrl+C in a terminal reaches the whole process group; the service decides what it means.
        self._child, self.conn = start_python_child(engine_main, (hardware,), name="kestrel-engine",
                                                    limits=ChildLimits(ignore_interrupt=True))
        self.process = self._child.process
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
        if not isinstance(error, (BrokenPipeError, ConnectionResetError)):
            self._child.kill()

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
        if not self.process.is_alive():
            self._child.end()  # gone: let the supervisor forget it
        self._post(PipeClosed(self.process.exitcode, self.hang, self.silent_s))

    def _post(self, event: Delivered) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._deliver, self, event)
            return True
        except RuntimeError:  # The loop is closed: nobody is listening any more.
            return False

    def kill(self) -> None:
        self._writer.close()
        self._child.end()
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
        self._child.kill()
