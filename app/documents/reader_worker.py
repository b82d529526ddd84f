"""The reader's child process: files are parsed there, one at a time, under a time limit and a memory cap."""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Callable

from app.documents.reading import read_document
from app.documents.values import DocumentText, ReadLimits, Unreadable, UnreadableCause as Cause

Result = DocumentText | Unreadable
# What the child runs on each file: read_document, or a test's stand-in that hangs or crashes.
# It must be picklable (a module-level function): the child is spawned.
ReadFunction = Callable[..., Result]
# How long a started child may take to say it is ready (an interpreter start and imports).
_START_S = 60.0
# Pools still running when the interpreter exits: their children are killed, not waited for.
_open_pools: "weakref.WeakSet[ReaderPool]" = weakref.WeakSet()


@atexit.register
def _kill_children_left_running() -> None:
    for pool in list(_open_pools):
        pool.close()


def reader_main(conn: Connection, limits: ReadLimits, read: ReadFunction) -> None:
    """The child's loop: a path in, a DocumentText or Unreadable out, until None or the pipe closes."""
    # Ctrl+C in a terminal reaches the whole process group; the parent decides when this ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cap_memory(limits.memory_bytes)
    exit_with_parent()
    lower_priority()
    conn.send("ready")
    while True:
        try:
            path = conn.recv()
        except (EOFError, OSError):
            return
        if path is None:
            return
        try:
            result = read(path, limits=limits)
        except MemoryError:
            result = Unreadable(path, f"reading it needed more than the {limits.memory_bytes // 2**20:,} MB "
                                      "of memory Kestrel gives its reader", Cause.OUT_OF_MEMORY)
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

    threading.Thread(target=watch, name="reader-parent-watch", daemon=True).start()


def lower_priority() -> None:
    """Reading runs beside chat: it gives way to the engine and the window on a busy machine."""
    if hasattr(os, "nice"):
        try:
            os.nice(5)
        except OSError:
            pass


class ReaderPool:
    """One reader child process, started when the first file comes and started again after a file
    killed it. A file that takes longer than `limits.seconds_per_file`, or makes the child crash
    or run out of memory, comes back as an Unreadable with the reason; the next file goes on.
    One caller thread at a time (the index's worker thread): a file is sent and waited for."""

    def __init__(self, limits: ReadLimits = ReadLimits(), read: ReadFunction = read_document) -> None:
        self._limits = limits
        self._read = read
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self.restarts = 0  # children started again after one was killed or crashed
        _open_pools.add(self)

    def __enter__(self) -> ReaderPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def read(self, path: Path) -> Result:
        """Read one file in the child; never raises for anything the file does."""
        conn = self._started()
        conn.send(path)
        if conn.poll(self._limits.seconds_per_file):
            try:
                result: Result = conn.recv()
                return result
            except (EOFError, OSError):
                return self._died(path)
        self._kill()
        return Unreadable(path, f"reading it took longer than {self._limits.seconds_per_file:g} s, so "
                                "Kestrel stopped: the file may be damaged or built to hang a reader",
                          Cause.TIMED_OUT)

    def read_all(self, paths: Iterable[Path]) -> Iterator[Result]:
        """Each path's result, in order."""
        for path in paths:
            yield self.read(path)

    def close(self) -> None:
        """Stop the child: asked to end, then killed if it is in the middle of a file."""
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
        process = ctx.Process(target=reader_main, args=(child, self._limits, self._read),
                              name="kestrel-reader", daemon=True)
        process.start()
        child.close()
        self._process, self._conn = process, parent
        if not parent.poll(_START_S) or parent.recv() != "ready":
            self._kill()
            raise RuntimeError("the document reader process did not start")
        return parent

    def _died(self, path: Path) -> Unreadable:
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
        return Unreadable(path, f"the reader crashed on it ({how}): the file is probably damaged, or it "
                                f"needed more than the {self._limits.memory_bytes // 2**20:,} MB of memory "
                                "the reader may use", Cause.DAMAGED)

    def _kill(self) -> None:
        process, conn = self._process, self._conn
        self._conn = None
        if process is not None and process.is_alive():
            process.kill()
            process.join(timeout=5)
        if conn is not None:
            conn.close()


def read_in_worker(paths: Iterable[Path], *, limits: ReadLimits = ReadLimits()) -> Iterator[Result]:
    """Read `paths` in one reader child process, yielding each file's result in order; the child
    ends when the iteration does (or is abandoned)."""
    with ReaderPool(limits) as pool:
        yield from pool.read_all(paths)
