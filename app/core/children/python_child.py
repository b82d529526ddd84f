"""Python children (multiprocessing's spawn method): started with their limits from one long-lived thread,
registered, and ended through the supervisor.

The engine, the embedding child, the document reader and the image check each start theirs here and
keep only their own protocol over the pipe (a "ready", a Shutdown, what a crash means to their user).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import psutil

from app.core.children import registry, windows_job
from app.core.children.in_child import ChildLimits, child_main

# How long a killed child is waited for (reaped): SIGKILL ends even a stopped process at once.
_REAP_S = 5.0
# At exit a child asked to end gets this long before it is killed: a Python child without a SIGTERM
# handler ends at once, so a child still there by then is stuck (in native code, or stopped).
_EXIT_GRACE_S = 0.5


class PythonChild:
    """One Python child: its process (multiprocessing's, so `multiprocessing.active_children()` lists it),
    its Windows job, and its place in the registry until end()."""

    grace_s = _EXIT_GRACE_S

    def __init__(self, process: BaseProcess, job: windows_job.WindowsJob | None) -> None:
        self.process = process
        self._job = job
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def exitcode(self) -> int | None:
        """As multiprocessing says it: None while it runs, -N when signal N ended it."""
        return self.process.exitcode

    def is_alive(self) -> bool:
        return self.process.is_alive()

    def has_ended(self) -> bool:
        return not self.process.is_alive()

    def wait(self, seconds: float) -> int | None:
        """Wait up to seconds for the child to exit (its owner asked it to); its exit code, None if it runs on."""
        self.process.join(seconds)
        return self.process.exitcode

    def ask_to_end(self) -> None:
        """SIGTERM to what the child started, then to the child."""
        if self.process.is_alive():
            if os.name == "posix":  # on Windows the job holds what it started
                _signal_descendants(self.process.pid, signal.SIGTERM)
            self.process.terminate()

    def kill(self) -> None:
        """End it and what it started now, without waiting: SIGKILL (it ends a stopped process too); on
        Windows the whole job. (Linux and macOS reach what it started while it runs: none of Kestrel's
        Python children starts processes of its own today.)"""
        if self.process.is_alive():
            if os.name == "posix":
                _signal_descendants(self.process.pid, signal.SIGKILL)
            self.process.kill()
        with self._lock:
            job = self._job
        if job is not None:
            job.terminate()

    def end(self, grace_s: float = 0.0) -> None:
        """Give the child up to grace_s to exit on its own (its owner asked it to, over its pipe), kill it if
        it has not, reap it, and let it go: out of the registry, its Windows job closed. Safe to call again."""
        if grace_s > 0 and self.process.is_alive():
            self.process.join(grace_s)
        if self.process.is_alive():
            self.kill()
        self.process.join(_REAP_S)
        registry.release(self)
        with self._lock:
            job, self._job = self._job, None
        if job is not None:
            job.close()


def start_python_child(target: Callable[..., None], args: tuple[Any, ...], *, name: str,
                       limits: ChildLimits = ChildLimits()) -> tuple[PythonChild, Connection]:
    """Start target(conn, *args) in a new spawned child under limits, where conn is the child's end of a
    duplex pipe; the child, and Kestrel's end of the pipe (the caller closes it).

    target must be picklable (a module-level function): the child is a new interpreter (spawn, on every
    system, so that what runs here is what runs on Windows). It dies with Kestrel however Kestrel ends
    (the death signal, the job object) and is ended at Kestrel's exit if its owner has not ended it."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe(duplex=True)
    process = context.Process(target=child_main, args=(os.getpid(), limits, target, (theirs, *args)), name=name,
                              daemon=True)
    try:
        _starter.start(process)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    assert process.pid is not None
    child = PythonChild(process, windows_job.contain(process.pid, limits.memory_bytes))
    registry.register(child)
    return child, ours


def _signal_descendants(pid: int | None, number: int) -> None:
    try:
        descendants = psutil.Process(pid).children(recursive=True) if pid is not None else []
    except psutil.Error:
        return  # gone meanwhile
    for descendant in descendants:
        try:
            descendant.send_signal(number)
        except psutil.Error:
            continue


class _StartingThread:
    """Starts every Python child from one thread that lives as long as Kestrel.

    Linux sends the death signal when the *thread* that started a child ends, not the process: a child
    started from a worker thread (a document index's, asyncio.to_thread's) would die with that thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._asked: queue.SimpleQueue[tuple[BaseProcess, Future[None]]] = queue.SimpleQueue()

    def start(self, process: BaseProcess) -> None:
        """process.start() on the starting thread; raises what it raised."""
        try:
            self._running()
        except RuntimeError:  # no new threads at interpreter shutdown: start it from here
            process.start()
            return
        done: Future[None] = Future()
        self._asked.put((process, done))
        done.result()

    def _running(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="kestrel-children", daemon=True)
                self._thread.start()

    def _serve(self) -> None:
        while True:
            process, done = self._asked.get()
            try:
                process.start()
            except BaseException as exc:  # handed to the caller, whatever it is
                done.set_exception(exc)
            else:
                done.set_result(None)


_starter = _StartingThread()
