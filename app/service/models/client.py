"""EngineClient: the asyncio handle on the engine child process, for every front end."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import AsyncIterator, Callable, Sequence, TypeVar

from app.core.generation import GenerationSettings
from app.core.settings import DevicePreference, PromptLookupMode
from app.engine import protocol as p
from app.engine.failure_words import WINDOW, describe
from app.engine.failures import During, EngineStopped, Hang, NoModel, OtherVersion
from app.engine.process import HardwareSource
from app.hardware.report import HardwareReport
from app.service.models.engine_errors import EngineCrashed, EngineDied, EngineError
from app.service.models.engine_process import Delivered, EngineProcess, NotSent, PipeClosed

_Answer = TypeVar("_Answer", bound=p.EngineEvent)


# How long the engine may stay silent while a request is out (not even answering a
# ping, which its reader thread does at once) before it counts as hung and is ended.
# Loading gets longer: a runtime may hold the interpreter while it reads a big model.
HANG_AFTER_S = 30.0
HANG_AFTER_LOADING_S = 180.0
# After Stop, how long a silent engine has to show a sign of life, and how long a live
# one (deep in a long prompt, where it cannot look at Stop) has to end the answer.
STOP_GRACE_S = 3.0
STOP_LIMIT_S = 10.0
PING_EVERY_S = 1.0


class EngineClient:
    """Starts the engine on demand, restarts it after a crash, streams answers.

    `async for event in client.generate(messages, settings)` yields Delta events and a
    final Done. A crash mid-answer raises EngineCrashed (what was streamed stays with
    the caller); the next request starts a fresh engine and reloads the model.
    """

    def __init__(self, *, start_timeout: float = 60.0, hardware: HardwareSource | None = None,
                 hang_after: float = HANG_AFTER_S, hang_after_loading: float = HANG_AFTER_LOADING_S,
                 stop_grace: float = STOP_GRACE_S, stop_limit: float = STOP_LIMIT_S,
                 ping_every: float = PING_EVERY_S) -> None:
        # hardware: a picklable function giving the engine a HardwareReport instead of
        # probing (tests give it a recorded machine).
        self._hardware = hardware
        self._hang_after, self._hang_after_loading = hang_after, hang_after_loading
        self._stop_grace, self._stop_limit, self._ping_every = stop_grace, stop_limit, ping_every
        self._watchdog: asyncio.Task[None] | None = None
        self._stop_asked_at: float | None = None
        self._stop_ping = 0  # the ping sent with Stop: its answer proves the engine alive
        self._loading = False
        self._engine: EngineProcess | None = None
        self._hello: asyncio.Future[p.Hello | PipeClosed] | None = None
        self._pending: dict[int, asyncio.Queue[Delivered]] = {}
        self._ids = itertools.count(1)
        self._last_load: p.Load | None = None
        self._current_generation: int | None = None
        self._start_timeout = start_timeout
        self.loaded: p.Loaded | None = None
        self.restarts = 0
        # Prompt-lookup drafting for the next answers (Generate.prompt_lookup).
        self.prompt_lookup = PromptLookupMode.OFF
        # Called when the engine dies on its own or is ended as hung, so that a front
        # end can say so at once rather than on the next request.
        self.on_died: Callable[[EngineDied], None] | None = None

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
        engine = self._engine = EngineProcess(loop, self._deliver, self._hardware)
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog = loop.create_task(self._watch(engine))
        hello = await asyncio.wait_for(self._hello, self._start_timeout)
        if isinstance(hello, PipeClosed):
            raise EngineCrashed(hello.stopped(During.START))
        if hello.protocol_version != p.PROTOCOL_VERSION:
            raise EngineError(OtherVersion(hello.protocol_version))

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Ask the engine to exit; kill it if it does not within the timeout."""
        self.cancel()
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        engine, self._engine = self._engine, None
        self.loaded = None
        if engine is None:
            return
        if engine.alive:
            sent, ping = time.monotonic(), next(self._ids)
            try:
                engine.send(p.Ping(ping))
                engine.send(p.Shutdown(next(self._ids)))
            except (BrokenPipeError, OSError):
                pass
            deadline = sent + timeout
            while engine.process.is_alive() and time.monotonic() < deadline:
                # A healthy engine answers the ping at once, even while it unloads; a
                # stopped or hung one is not waited for.
                if engine.last_ping_answered < ping and time.monotonic() - sent > min(self._stop_grace, timeout):
                    break
                await asyncio.sleep(0.02)
        engine.kill()

    def kill(self) -> None:
        """Stop the engine at once (the window is closing or a test wants a crash)."""
        if self._engine is not None:
            self._engine.kill()

    # --- requests -------------------------------------------------------------------

    async def load(self, model_path: str, *, context_length: int = 4096,
                   threads: int | None = None, device: DevicePreference = DevicePreference.AUTO,
                   gpu_layers: int | None = None,
                   chat_template: str | None = None, state_ram_bytes: int = 0, state_dir: str | None = None,
                   state_disk_bytes: int = 0, projector_path: str | None = None) -> p.Loaded:
        """Load a model where placement says for the device the user prefers.

        Raises EngineError with kind model_file, model_load or placement_refused.
        """
        await self.start()
        request = p.Load(next(self._ids), str(model_path), context_length, threads, device,
                         gpu_layers, chat_template, state_ram_bytes, state_dir, state_disk_bytes,
                         projector_path)
        self.loaded = None
        self._loading = True
        try:
            event = await self._roundtrip(request, During.LOAD, p.Loaded)
        finally:
            self._loading = False
        self._last_load = request
        self.loaded = event
        return event

    async def hardware_report(self) -> HardwareReport:
        """What the engine sees of the machine, probed once per engine."""
        await self.start()
        event = await self._roundtrip(p.Probe(next(self._ids)), During.PROBE, p.Report)
        return event.report

    async def count_tokens(self, text: str) -> int:
        """How many tokens text takes inside a prompt, by the loaded model's own tokenizer:
        for a GGUF model len(Llama.tokenize(text, add_bos=False, special=False)), for an ONNX
        model ONNX Runtime GenAI's tokenizer (its own BOS not counted).

        Answered beside a running answer, not after it (app/engine/counting.py); a count
        sent after a load counts with the new model. Raises EngineError(NoModel) at once
        when no model is loaded or loading: a count never loads one (after an idle unload
        the next answer loads it again, not a count). EngineCrashed if the engine dies.
        """
        return await self._count(p.CountTokens(next(self._ids), text))

    async def count_prompt(self, messages: Sequence[p.ChatMessage], *, thinking: bool = True) -> int:
        """How many tokens the prompt of generate(messages) is: the model's chat template
        applied, the opening of the answer included, no turn left out; thinking as
        GenerationSettings.thinking. Scheduled and refused as count_tokens."""
        return await self._count(p.CountTokens(next(self._ids), messages=tuple(messages), thinking=thinking))

    async def _count(self, request: p.CountTokens) -> int:
        if not self.running or (self.loaded is None and not self._loading):
            raise EngineError(NoModel())
        event = await self._roundtrip(request, During.COUNT, p.TokenCount)
        return event.tokens

    async def reset(self) -> None:
        """Forget the cached conversation in the engine."""
        if self.running:
            await self._roundtrip(p.Reset(next(self._ids)), During.RESET, p.Ack)

    async def forget_states(self) -> None:
        """Drop the engine's saved chat states (RAM and the files it knows of)."""
        if self.running:
            await self._roundtrip(p.ForgetStates(next(self._ids)), During.FORGET_STATES, p.Ack)

    async def unload(self) -> None:
        """Free the model's memory; the next generate loads it again."""
        if self.running:
            await self._roundtrip(p.Unload(next(self._ids)), During.UNLOAD, p.Ack)
        self.loaded = None

    async def generate(self, messages: Sequence[p.ChatMessage],
                       settings: GenerationSettings | None = None, *,
                       stop: Sequence[str] = (),
                       trim_history: bool = False, threads: int | None = None,
                       shape: p.AnswerShape | None = None, keep_state: bool = True) -> AsyncIterator[p.Delta | p.Done]:
        """Stream an answer: Delta events, then one Done.

        With trim_history the engine leaves out the oldest turns that do not fit the
        context (Done.stats.messages_left_out) instead of raising context_overflow.
        shape: a raw prompt, a grammar or tools (protocol.AnswerShape); a shape the model
        cannot have raises EngineError (kind unsupported) before any Delta.
        """
        await self._ensure_loaded()
        request = p.Generate(next(self._ids), tuple(messages), settings or GenerationSettings(), tuple(stop),
                             trim_history, threads, self.prompt_lookup, shape or p.AnswerShape(), keep_state)
        queue = self._open(request.request_id)
        self._current_generation = request.request_id
        finished = False
        try:
            self._send(request, During.GENERATE)
            while True:
                event = await queue.get()
                finished = not isinstance(event, p.Delta)
                answered = self._check(event, During.GENERATE)
                if not isinstance(answered, (p.Delta, p.Done)):
                    raise RuntimeError(f"the engine answered {type(answered).__name__} to Generate")
                yield answered
                if finished:
                    return
        finally:
            self._pending.pop(request.request_id, None)
            # A caller that returns on Done leaves this generator to be closed later,
            # perhaps after the next answer began: only clear what is still ours.
            if self._current_generation == request.request_id:
                self._current_generation = None
                self._stop_asked_at = None
            if not finished:
                self._send_quietly(p.Cancel(request.request_id))

    def cancel(self) -> None:
        """Stop the answer being generated; its stream ends with Done(cancelled).

        An engine that shows no sign of life within stop_grace after this is ended and
        reported (EngineDied.restart), so Stop always works.
        """
        if self._current_generation is not None:
            self._send_quietly(p.Cancel(self._current_generation))
            if self._stop_asked_at is None:
                self._stop_asked_at = time.monotonic()
                self._stop_ping = next(self._ids)
                self._send_quietly(p.Ping(self._stop_ping))

    def pause(self) -> None:
        """Hold generation between two tokens (the window went to the background)."""
        self._send_quietly(p.Pause(next(self._ids)))

    def resume(self) -> None:
        self._send_quietly(p.Resume(next(self._ids)))

    # --- plumbing -------------------------------------------------------------------

    async def _watch(self, engine: EngineProcess) -> None:
        """While something is asked of the engine, ping it; end it if it stays silent.

        Its silence counts from when something was asked, not from the last word heard:
        an engine idle for longer than the limit, slow to take up the next request on a busy
        machine, was ended at once as "silent for" the whole idle time (seen: 900 s).
        """
        last_ping = 0.0
        busy_from: float | None = None
        tick = min(0.25, self._ping_every)
        while engine.alive and engine is self._engine:
            await asyncio.sleep(tick)
            if not (self._pending or self._stop_asked_at is not None) or not engine.alive:
                busy_from = None
                continue  # idle: nothing is expected of it, so its silence means nothing
            now = time.monotonic()
            if busy_from is None:
                busy_from = now
            if now - last_ping >= self._ping_every:
                self._send_quietly(p.Ping(next(self._ids)))
                last_ping = now
            silent = now - max(engine.last_heard, busy_from)
            stop_at = self._stop_asked_at
            if stop_at is not None and (now - stop_at > self._stop_limit or (
                    engine.last_ping_answered < self._stop_ping and now - stop_at > self._stop_grace)):
                engine.end_hung(Hang.IGNORED_STOP)
                return
            if silent > (self._hang_after_loading if self._loading else self._hang_after):
                engine.end_hung(Hang.SILENT, silent)
                return

    async def _ensure_loaded(self) -> None:
        if self.running and self.loaded is not None:
            return
        if self._last_load is None:
            raise EngineError(NoModel())
        last = self._last_load
        await self.load(last.model_path, context_length=last.context_length,
                        threads=last.threads, device=last.device, gpu_layers=last.gpu_layers,
                        chat_template=last.chat_template, state_ram_bytes=last.state_ram_bytes,
                        state_dir=last.state_dir, state_disk_bytes=last.state_disk_bytes,
                        projector_path=last.projector_path)

    async def _roundtrip(self, request: p.Request, during: During, answer: type[_Answer]) -> _Answer:
        """Send request and wait for its one answer, which must be of type answer."""
        queue = self._open(request.request_id)
        try:
            self._send(request, during)
            event = self._check(await queue.get(), during)
        finally:
            self._pending.pop(request.request_id, None)
        if not isinstance(event, answer):
            raise RuntimeError(f"the engine answered {type(event).__name__} to {type(request).__name__}")
        return event

    def _open(self, request_id: int) -> asyncio.Queue[Delivered]:
        queue: asyncio.Queue[Delivered] = asyncio.Queue()
        self._pending[request_id] = queue
        return queue

    def _send(self, request: p.Request, during: During) -> None:
        """Queue request for the engine; the writing happens on the engine's writer thread.

        An engine already known dead raises EngineCrashed here; one whose pipe breaks
        while the request waits ends it with PipeClosed (EngineProcess), as a crash does."""
        engine = self._engine
        if engine is None or not engine.alive:
            raise EngineCrashed(EngineStopped(None, during))
        try:
            engine.send(request)
        except (BrokenPipeError, OSError) as exc:
            raise EngineCrashed(EngineStopped(None, during)) from exc

    def _send_quietly(self, request: p.Request) -> None:
        engine = self._engine
        if engine is not None and engine.alive:
            try:
                engine.send(request)
            except (BrokenPipeError, OSError):
                pass

    def _check(self, event: Delivered, during: During) -> p.EngineEvent:
        """The event, or the EngineError it stands for."""
        if isinstance(event, p.Error):
            raise EngineError(event.failure)
        if isinstance(event, PipeClosed):
            raise EngineCrashed(event.stopped(during))
        if isinstance(event, NotSent):
            raise RuntimeError(f"a request ({during.value}) could not be pickled for the engine") from event.cause
        return event

    def _deliver(self, engine: EngineProcess, event: Delivered) -> None:
        """Runs on the event loop: route one event from an engine's reader thread."""
        if isinstance(event, p.Hello):
            if engine is self._engine and self._hello and not self._hello.done():
                self._hello.set_result(event)
            return
        if isinstance(event, PipeClosed):
            self._on_died(engine, event)
            return
        queue = self._pending.get(event.request_id)
        if queue is not None and engine is self._engine:
            queue.put_nowait(event)

    def _on_died(self, engine: EngineProcess, died: PipeClosed) -> None:
        engine.alive = False
        if engine is not self._engine:
            return
        self.loaded = None
        self._stop_asked_at = None
        if self._hello and not self._hello.done():
            self._hello.set_result(died)
        for queue in self._pending.values():
            queue.put_nowait(died)
        if self.on_died is not None:
            self.on_died(EngineDied(died.exit_code, describe(died.stopped(During.IDLE), WINDOW),
                                    restart=died.hang == Hang.IGNORED_STOP))
