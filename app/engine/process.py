"""The engine process: a request loop over one pipe, one model at a time."""

from __future__ import annotations

import ctypes
import gc
import os
import queue
import sys
import signal
import threading
import traceback
from concurrent.futures import Future
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Callable

from app.engine import protocol as p
from app.engine.backends.backend import Backend
from app.engine.backends.registry import backend_for, located, unsupported
from app.engine.backends.spec import BackendSpec
from app.engine.control import GenerationControl
from app.engine.counting import ModelGate, serve_counts
from app.engine.errors import ContextOverflow, ImageRefused, ModelLoadError, ServerFailedError, ShapeRefused
from app.engine.failures import BadModelFile, EngineBug, Failure, NoBackend, NoModel, UnknownRequest
from app.hardware.report import HardwareReport
from app.library.model_files.gguf_info import ModelFileError

# Must be picklable (spawned process): tests pass a recorded machine's report.
HardwareSource = Callable[[], HardwareReport]


class _Outbox:
    """Sends events; the reader thread and the request loop both reply."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    def send(self, event: p.EngineEvent) -> None:
        with self._lock:
            try:
                self._conn.send(event)
            except (BrokenPipeError, EOFError, OSError):
                # The UI process is gone; the request loop ends on its own EOF.
                pass


class EngineLoop:
    """Owns the backend; runs requests in order; cancel/pause arrive beside them, and
    token counts are answered beside them on a thread of their own (app/engine/counting.py)."""

    def __init__(self, conn: Connection, hardware: HardwareSource | None = None) -> None:
        self._conn = conn
        self._out = _Outbox(conn)
        self._inbox: queue.Queue[p.Request] = queue.Queue()
        self._counts: queue.Queue[p.CountTokens | None] = queue.Queue()  # None: the loop ended
        self._gate = ModelGate()
        self._control = GenerationControl()
        self._backend: Backend | None = None
        self._spec: BackendSpec | None = None  # the registered backend that opened it
        self._name = ""  # the model's file or folder name, or its address, for refusals
        self._hardware = hardware
        self._report: Future[HardwareReport] = Future()

    def run(self) -> None:
        self._out.send(p.Hello(p.PROTOCOL_VERSION, os.getpid()))
        threading.Thread(target=self._read, name="engine-reader", daemon=True).start()
        # Probing takes ~0.5 s (ONNX Runtime, llama.cpp's devices): start it now, so it
        # is done by the time the first model is asked for.
        threading.Thread(target=self._probe, name="engine-probe", daemon=True).start()
        threading.Thread(target=serve_counts, args=(self._counts, self._gate, lambda: self._backend, self._out.send),
                         name="engine-counter", daemon=True).start()
        while True:
            request = self._inbox.get()
            if isinstance(request, p.Shutdown):
                with self._gate.changing():
                    self._unload()
                self._counts.put(None)  # the counting thread ends with the loop
                self._out.send(p.Ack(request.request_id, p.AckKind.SHUTDOWN))
                return
            if isinstance(request, (p.Load, p.Unload)):
                with self._gate.changing():
                    self._handle(request)
            else:
                self._handle(request)

    def _read(self) -> None:
        """Answer pings and route cancel/pause/resume at once; counts go to the counting
        thread, the rest to the loop (a change of model announced first, in pipe order)."""
        while True:
            try:
                request: p.Request = self._conn.recv()
            except (EOFError, OSError):
                self._control.cancel()
                self._gate.announce()
                self._inbox.put(p.Shutdown())
                return
            if isinstance(request, p.Ping):
                self._out.send(p.Ack(request.request_id, p.AckKind.PING))
            elif isinstance(request, (p.Cancel, p.Pause, p.Resume)):
                self._steer(request)
            elif isinstance(request, p.CountTokens):
                self._counts.put(request)
            else:
                if isinstance(request, (p.Load, p.Unload, p.Shutdown)):
                    self._gate.announce()
                self._inbox.put(request)

    def _steer(self, request: p.Cancel | p.Pause | p.Resume) -> None:
        if isinstance(request, p.Cancel):
            self._control.cancel_request(request.request_id)
        elif isinstance(request, p.Pause):
            self._control.pause()
            self._out.send(p.Ack(request.request_id, p.AckKind.PAUSE))
        else:
            self._control.resume()
            self._out.send(p.Ack(request.request_id, p.AckKind.RESUME))

    def _handle(self, request: p.Request) -> None:
        try:
            if isinstance(request, p.Load):
                self._load(request)
            elif isinstance(request, p.Generate):
                self._generate(request)
            elif isinstance(request, p.Reset):
                if self._backend is not None:
                    self._backend.reset()
                self._out.send(p.Ack(request.request_id, p.AckKind.RESET))
            elif isinstance(request, p.ForgetStates):
                if self._backend is not None:
                    self._backend.forget_states()
                self._out.send(p.Ack(request.request_id, p.AckKind.FORGET_STATES))
            elif isinstance(request, p.Probe):
                self._out.send(p.Report(request.request_id, self._machine()))
            elif isinstance(request, p.Unload):
                self._unload()
                self._out.send(p.Ack(request.request_id, p.AckKind.UNLOAD))
            else:  # Cancel, Pause, Resume and Ping never get here; anything else is a bug.
                self._error(request, UnknownRequest(type(request).__name__))
        except Exception as exc:  # A bug: report it with its traceback, keep serving.
            self._error(request, EngineBug(f"{type(exc).__name__}: {exc}", traceback.format_exc()))

    def _probe(self) -> None:
        """Probe once per engine: the process that loads models must be the one that
        looks (Windows ML registers providers per process)."""
        try:
            if self._hardware is not None:
                report = self._hardware()
            else:
                from app.hardware.probe import probe

                report = probe()
        except Exception as exc:  # A bug in a probe: every load reports it.
            self._report.set_exception(exc)
        else:
            self._report.set_result(report)

    def _machine(self) -> HardwareReport:
        return self._report.result()

    def _load(self, request: p.Load) -> None:
        """The model on the first registered backend that takes its location
        (app/engine/backends/registry.py); a path no backend takes is refused in the library's
        words, an address with NoBackend."""
        # The probe first: it imports numpy, ONNX Runtime and llama.cpp in its thread,
        # and importing them here at the same time can see half-initialised modules.
        machine = self._machine()
        self._unload()
        location, problem = located(request.model_path)
        spec = backend_for(location)
        try:
            if spec is None:
                raise problem or ModelLoadError(NoBackend(request.model_path))
            backend = spec.open(request, machine)
        except ModelFileError as exc:  # ModelFolderError too, for ONNX folders
            self._error(request, BadModelFile(exc.kind, exc.message))
            return
        except ModelLoadError as exc:
            self._error(request, exc.failure)
            return
        self._backend, self._spec = backend, spec
        self._name = location.text if location.is_address else Path(location.text).name
        self._out.send(backend.loaded)

    def _generate(self, request: p.Generate) -> None:
        if self._backend is None or self._spec is None:
            self._error(request, NoModel())
            return
        refusal = unsupported(self._spec, request.shape, self._name, request.settings)
        if refusal is not None:
            self._error(request, refusal)
            return
        self._control.begin(request.request_id)
        try:
            for event in self._backend.generate(request, self._control):
                self._out.send(event)
        except (ContextOverflow, ShapeRefused, ImageRefused, ServerFailedError) as exc:
            self._error(request, exc.failure)
        finally:
            self._control.end()

    def _unload(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = self._spec = None
            gc.collect()
            give_back_freed_memory()

    def _error(self, request: p.Request, failure: Failure) -> None:
        self._out.send(p.Error(request.request_id, failure))


def give_back_freed_memory() -> None:
    """Return the heap a closed model freed to the OS. glibc keeps freed blocks in its
    arenas for reuse, so RSS stays high after a model is unloaded until malloc_trim; other
    C libraries (Windows, macOS) return large blocks by themselves."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc (musl has no malloc_trim)


def engine_main(conn: Connection, hardware: HardwareSource | None = None) -> None:
    """Entry point of the engine child process.

    hardware replaces the live probe (tests pass a recorded machine's report).
    """
    # Ctrl+C in a terminal reaches the whole process group; the UI process decides
    # what it means (cancel, then shutdown), so the engine must not die of it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    EngineLoop(conn, hardware).run()
