"""The one thread that pickles an engine's requests and writes them into its pipe, in order."""

from __future__ import annotations

import queue
import threading
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Callable

from app.engine import protocol as p


class PipeWriter:
    """Writes requests on a thread of its own, in the order send() was called.

    A Generate with 16 images is some 24 MB: pickling it and writing it through a 64 KB
    pipe buffer takes as long as the engine's reader needs to take it out, and the
    caller is the window's event loop. send() only queues; one thread writes, so a Cancel
    or Ping sent after a Generate still arrives after it, whichever thread sent it.

    on_broken is called (on the writer's thread) once, when a write fails: the pipe is
    then unusable, every later send() raises BrokenPipeError, and what was still queued
    is dropped. on_unsendable is called for a request that cannot be pickled (a bug in
    what was asked); nothing of it was written, and the writer goes on.
    """

    def __init__(self, conn: Connection, *, on_broken: Callable[[OSError], None],
                 on_unsendable: Callable[[p.Request, Exception], None], name: str = "engine-pipe-writer") -> None:
        self._conn = conn
        self._on_broken = on_broken
        self._on_unsendable = on_unsendable
        self._queue: queue.SimpleQueue[p.Request | None] = queue.SimpleQueue()
        # Held while checking _closed and queueing, so nothing is queued behind the end mark.
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._write, name=name, daemon=True)
        self._thread.start()

    def send(self, request: p.Request) -> None:
        """Queue request to be written after everything sent before it; returns at once."""
        with self._lock:
            if self._closed:
                raise BrokenPipeError("the engine's pipe is closed")
            self._queue.put(request)

    def close(self) -> None:
        """Write what is queued (a pipe that breaks drops it), then end the thread."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue.put(None)

    def join(self, timeout: float) -> bool:
        """Wait for the thread to end (after close, or after a failed write); whether it did."""
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _write(self) -> None:
        while True:
            request = self._queue.get()
            if request is None:
                return
            try:
                data = ForkingPickler.dumps(request)
            except Exception as exc:  # A bug in the request: reported, and nothing of it written.
                self._on_unsendable(request, exc)
                continue
            try:
                self._conn.send_bytes(data)
            except OSError as exc:  # BrokenPipeError, ConnectionResetError, a closed handle
                with self._lock:
                    self._closed = True
                self._on_broken(exc)
                return
