"""EngineClient: the UI process's asyncio handle on the engine child process."""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import threading
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Sequence

from app.core.generation import GenerationSettings
from app.engine import protocol as p
from app.engine.process import engine_main


class EngineError(Exception):
    """A request failed; kind says what the user can do about it."""

    def __init__(self, kind: p.ErrorKind | str, message: str, details: dict | None = None) -> None:
        super().__init__(message)
        self.kind = p.ErrorKind(kind)
        self.message = message
        self.details = details or {}


class EngineCrashed(EngineError):
    """The engine process died while a request was in flight."""

    def __init__(self, message: str, exit_code: int | None, during: str) -> None:
        super().__init__(p.ErrorKind.CRASHED, message, {"exit_code": exit_code, "during": during})
        self.exit_code = exit_code
        self.during = during


@dataclass(frozen=True)
class _Died:
    """Posted to every waiting request when the engine's pipe closes."""

    exit_code: int | None


class _EngineProcess:
    """One engine child process, its pipe, and the thread that reads it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, deliver: Callable[["_EngineProcess", Any], None],
                 hardware: Callable[[], Any] | None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=engine_main, args=(child, hardware), name="kestrel-engine",
                                   daemon=True)
        self.process.start()
        child.close()
        self.alive = True
        self._send_lock = threading.Lock()
        self._loop = loop
        self._deliver = deliver
        threading.Thread(target=self._read, name="engine-client-reader", daemon=True).start()

    def send(self, message: Any) -> None:
        with self._send_lock:
            self.conn.send(message)

    def _read(self) -> None:
        # A thread, not loop.add_reader: Windows' proactor loops cannot watch a pipe.
        while True:
            try:
                event = self.conn.recv()
            except (EOFError, OSError):
                break
            if not self._post(event):
                return
        self.process.join(timeout=2)
        self._post(_Died(self.process.exitcode))

    def _post(self, event: Any) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._deliver, self, event)
            return True
        except RuntimeError:  # The loop is closed: nobody is listening any more.
            return False

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()


class EngineClient:
    """Starts the engine on demand, restarts it after a crash, streams answers.

    `async for event in client.generate(messages, settings)` yields Delta events and a
    final Done. A crash mid-answer raises EngineCrashed (what was streamed stays with
    the caller); the next request starts a fresh engine and reloads the model.
    """

    def __init__(self, *, start_timeout: float = 60.0, hardware: Callable[[], Any] | None = None) -> None:
        # hardware: a picklable function giving the engine a HardwareReport instead of
        # probing (tests give it a recorded machine).
        self._hardware = hardware
        self._engine: _EngineProcess | None = None
        self._hello: asyncio.Future | None = None
        self._pending: dict[int, asyncio.Queue] = {}
        self._ids = itertools.count(1)
        self._last_load: p.Load | None = None
        self._current_generation: int | None = None
        self._start_timeout = start_timeout
        self.loaded: p.Loaded | None = None
        self.restarts = 0
        # Called with the exit code when the engine dies on its own, so that a front end
        # can say so at once rather than on the next request.
        self.on_died: Callable[[int | None], None] | None = None

    # --- lifecycle ------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        engine = self._engine
        return engine.process.pid if engine and engine.alive else None

    @property
    def load_request(self) -> p.Load | None:
        """What was last asked of load() (the engine may have clamped the context)."""
        return self._last_load

    @property
    def running(self) -> bool:
        return self._engine is not None and self._engine.alive

    async def start(self) -> None:
        """Start the engine process if it is not running."""
        if self.running:
            return
        loop = asyncio.get_running_loop()
        if self._engine is not None:
            self.restarts += 1
        self._hello = loop.create_future()
        self._engine = _EngineProcess(loop, self._deliver, self._hardware)
        hello = await asyncio.wait_for(self._hello, self._start_timeout)
        if isinstance(hello, _Died):
            raise EngineCrashed(_died_message("starting", hello.exit_code), hello.exit_code, "start")
        if hello.protocol_version != p.PROTOCOL_VERSION:
            raise EngineError(p.ErrorKind.PROTOCOL, "The engine is from another version of Kestrel. Reinstall Kestrel.")

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Ask the engine to exit; kill it if it does not within the timeout."""
        self.cancel()
        engine, self._engine = self._engine, None
        self.loaded = None
        if engine is None:
            return
        if engine.alive:
            try:
                engine.send(p.Shutdown(next(self._ids)))
            except (BrokenPipeError, OSError):
                pass
            deadline = time.monotonic() + timeout
            while engine.process.is_alive() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        engine.kill()

    def kill(self) -> None:
        """Stop the engine at once (the window is closing or a test wants a crash)."""
        if self._engine is not None:
            self._engine.kill()

    # --- requests -------------------------------------------------------------------

    async def load(self, model_path: str, *, context_length: int = 4096,
                   threads: int | None = None, device: str = "auto") -> p.Loaded:
        """Load a model where placement says (device: auto, npu, gpu or cpu).

        Raises EngineError with kind model_file, model_load or placement_refused.
        """
        await self.start()
        request = p.Load(next(self._ids), str(model_path), context_length, threads, device)
        self.loaded = None
        event = await self._roundtrip(request, "load")
        self._last_load = request
        self.loaded = event
        return event

    async def hardware_report(self) -> Any:
        """What the engine sees of the machine (a HardwareReport), probed once per engine."""
        await self.start()
        event = await self._roundtrip(p.Probe(next(self._ids)), "probe")
        return event.report

    async def reset(self) -> None:
        """Forget the cached conversation in the engine."""
        if self.running:
            await self._roundtrip(p.Reset(next(self._ids)), "reset")

    async def unload(self) -> None:
        """Free the model's memory; the next generate loads it again."""
        if self.running:
            await self._roundtrip(p.Unload(next(self._ids)), "unload")
        self.loaded = None

    async def generate(self, messages: Sequence[p.ChatMessage],
                       settings: GenerationSettings | None = None, *,
                       stop: Sequence[str] = (),
                       trim_history: bool = False) -> AsyncIterator[p.Delta | p.Done]:
        """Stream an answer: Delta events, then one Done.

        With trim_history the engine leaves out the oldest turns that do not fit the
        context (Done.stats.messages_left_out) instead of raising context_overflow.
        """
        await self._ensure_loaded()
        request = p.Generate(next(self._ids), tuple(messages), settings or GenerationSettings(), tuple(stop),
                             trim_history)
        queue = self._open(request.request_id)
        self._current_generation = request.request_id
        finished = False
        try:
            self._send(request, "generate")
            while True:
                event = await queue.get()
                finished = not isinstance(event, p.Delta)
                yield self._check(event, "generate")
                if finished:
                    return
        finally:
            self._pending.pop(request.request_id, None)
            # A caller that returns on Done leaves this generator to be closed later,
            # perhaps after the next answer began: only clear what is still ours.
            if self._current_generation == request.request_id:
                self._current_generation = None
            if not finished:
                self._send_quietly(p.Cancel(request.request_id))

    def cancel(self) -> None:
        """Stop the answer being generated; its stream ends with Done(cancelled)."""
        if self._current_generation is not None:
            self._send_quietly(p.Cancel(self._current_generation))

    def pause(self) -> None:
        """Hold generation between two tokens (the window went to the background)."""
        self._send_quietly(p.Pause(next(self._ids)))

    def resume(self) -> None:
        self._send_quietly(p.Resume(next(self._ids)))

    # --- plumbing -------------------------------------------------------------------

    async def _ensure_loaded(self) -> None:
        if self.running and self.loaded is not None:
            return
        if self._last_load is None:
            raise EngineError(p.ErrorKind.NO_MODEL, "No model is loaded. Choose a model first.")
        last = self._last_load
        await self.load(last.model_path, context_length=last.context_length,
                        threads=last.threads, device=last.device)

    async def _roundtrip(self, request: Any, during: str) -> Any:
        queue = self._open(request.request_id)
        try:
            self._send(request, during)
            return self._check(await queue.get(), during)
        finally:
            self._pending.pop(request.request_id, None)

    def _open(self, request_id: int) -> asyncio.Queue:
        queue: asyncio.Queue = asyncio.Queue()
        self._pending[request_id] = queue
        return queue

    def _send(self, request: Any, during: str) -> None:
        engine = self._engine
        if engine is None or not engine.alive:
            raise EngineCrashed(_died_message(during, None), None, during)
        try:
            engine.send(request)
        except (BrokenPipeError, OSError) as exc:
            raise EngineCrashed(_died_message(during, None), None, during) from exc

    def _send_quietly(self, request: Any) -> None:
        engine = self._engine
        if engine is not None and engine.alive:
            try:
                engine.send(request)
            except (BrokenPipeError, OSError):
                pass

    def _check(self, event: Any, during: str) -> Any:
        if isinstance(event, p.Error):
            raise EngineError(event.kind, event.message, event.details)
        if isinstance(event, _Died):
            raise EngineCrashed(_died_message(during, event.exit_code), event.exit_code, during)
        return event

    def _deliver(self, engine: _EngineProcess, event: Any) -> None:
        """Runs on the event loop: route one event from an engine's reader thread."""
        if isinstance(event, p.Hello):
            if engine is self._engine and self._hello and not self._hello.done():
                self._hello.set_result(event)
            return
        if isinstance(event, _Died):
            self._on_died(engine, event)
            return
        queue = self._pending.get(getattr(event, "request_id", -1))
        if queue is not None and engine is self._engine:
            queue.put_nowait(event)

    def _on_died(self, engine: _EngineProcess, died: _Died) -> None:
        engine.alive = False
        if engine is not self._engine:
            return
        self.loaded = None
        if self._hello and not self._hello.done():
            self._hello.set_result(died)
        for queue in self._pending.values():
            queue.put_nowait(died)
        if self.on_died is not None:
            self.on_died(died.exit_code)


def _died_message(during: str, exit_code: int | None) -> str:
    code = f" (exit code {exit_code})" if exit_code is not None else ""
    if during == "load":
        return (f"The engine stopped while loading the model{code}. The file may be damaged "
                "or too big for this machine; try another model.")
    return (f"The engine stopped unexpectedly{code}. What was already written is kept; "
            "the next message starts a new engine.")
