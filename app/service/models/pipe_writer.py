"""The one thread that pickles an engine's requests and writes them into its pipe, in order."""

from __future__ import annotations

import os
import queue
import struct
import sys
import threading
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Callable

from app.engine import protocol as p

# A piece at least this big is written on its own, straight from the request's own bytes;
# smaller ones are gathered (a write each would be a system call each).
_BIG = 64 * 1024
_MAX_INT32 = 0x7FFFFFFF


class _Pieces:
    """A file for the pickler to write into that keeps what it is given, uncopied: the C
    pickler hands an image's bytes object over whole (protocol 4 writes anything over its
    64 KB frame straight to the file), and returns to Python between writes, so pickling a
    24 MB request never holds the interpreter lock for more than a frame."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(data if isinstance(data, bytes) else bytes(data))
        return len(data)


def pickled(request: p.Request) -> list[bytes]:
    """request as multiprocessing pickles it (ForkingPickler, the default protocol), in pieces."""
    pieces = _Pieces()
    ForkingPickler(pieces).dump(request)
    return pieces.parts


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]  # the lock is released while the kernel takes the bytes


def write_message(conn: Connection, parts: list[bytes]) -> None:
    """Write parts as one message that conn's other end reads with recv().

    On a socket or pipe handle (not Windows) the message is multiprocessing's length header
    then the bytes (Connection._send_bytes), written piece by piece with os.write, which
    releases the interpreter lock while it waits for the reader. A Windows pipe is message
    mode (one WriteFile is one message), so there the pieces are joined and sent whole."""
    if sys.platform == "win32":
        conn.send_bytes(b"".join(parts))
        return
    fd = conn.fileno()
    size = sum(len(part) for part in parts)
    header = struct.pack("!i", size) if size <= _MAX_INT32 else struct.pack("!iQ", -1, size)
    gathered = bytearray(header)
    for part in parts:
        if len(part) < _BIG:
            gathered += part
            continue
        _write_all(fd, gathered)
        gathered = bytearray()
        _write_all(fd, part)
    if gathered:
        _write_all(fd, gathered)


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
                parts = pickled(request)
            except Exception as exc:  # A bug in the request: reported, and nothing of it written.
                self._on_unsendable(request, exc)
                continue
            try:
                write_message(self._conn, parts)
            except OSError as exc:  # BrokenPipeError, ConnectionResetError, a closed handle
                with self._lock:
                    self._closed = True
                self._on_broken(exc)
                return
