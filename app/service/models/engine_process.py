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

# How long the reader of a dead engine leaves the closing of its writer to the loop (a busy window's
# loop may take a while) before it closes the writer itself.
_WRITER_END_S = 60.0


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
        # Held while the pipe is closed: the reader (when the engine dies) and kill() may both close it,
        # and a second os.close of the same number could close a handle opened meanwhile by another.
        self._pipe_lock = threading.Lock()
        # Before the reader: an engine that dies at once is seen by a reader that ends the writer.
        self._writer = PipeWriter(self.conn, on_broken=self._write_failed, on_unsendable=self._unsendable,
                                  name="engine-client-writer")
        self._reader = threading.Thread(target=self._read, name="engine-client-reader", daemon=True)
        self._reader.start()

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
                break
        self.process.join(timeout=2)
        if not self.process.is_alive():
            self._child.end()  # gone: let the supervisor forget it
        heard = self._post(PipeClosed(self.process.exitcode, self.hang, self.silent_s))
        # Nothing more can be written. An engine that died on its own is never kill()ed (the client
        # starts a new one), so its writer thread and its pipe end here; before, each death left a
        # writer waiting for ever, holding the pipe, the client and its event loop. The writer is
        # closed on the loop, after PipeClosed: a request sent before the loop heard of the death
        # still waits for PipeClosed (and its exit code), not a broken pipe.
        if not (heard and self._post_call(self._writer.close)):
            self._writer.close()
        deadline = time.monotonic() + _WRITER_END_S
        while not self._writer.join(timeout=0.1):
            if self._loop.is_closed() or time.monotonic() > deadline:  # the loop will not run it
                self._writer.close()
                if not self._writer.join(timeout=3):
                    return  # stuck in a write: the pipe stays open rather than closed under it
                break
        self._close_pipe()

    def _post(self, event: Delivered) -> bool:
        return self._post_call(self._deliver, self, event)

    def _post_call(self, callback: Callable[..., None], *args: object) -> bool:
        """callback(*args) on the loop; False when the loop is closed and nobody listens any more."""
        if self._loop.is_closed():  # qasync's closed loop takes the call without a word, and drops it
            return False
        try:
            self._loop.call_soon_threadsafe(callback, *args)
            return True
        except RuntimeError:  # closed meanwhile
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
        self._close_pipe()

    def _close_pipe(self) -> None:
        with self._pipe_lock:
            self.conn.close()  # a second close does nothing

    def end_hung(self, hang: Hang, silent_s: float = 0.0) -> None:
        """End an engine that stopped answering (SIGKILL works on a stopped process too);
        the reader thread then reports it as died, with why."""
        self.hang, self.silent_s = hang, silent_s
        self._child.kill()
