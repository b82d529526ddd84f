"""ScriptedEngine: an EngineHandle in this process, no child process, that answers from scripts.

It keeps EngineClient's observable contract (tests/service/test_engine_contract.py runs
the same checks on both): loads answer with the real engine's Loaded, answers stream
Delta events then one Done, cancel/pause/resume act between two tokens, and an engine
that dies or hangs raises EngineCrashed into the request in flight and tells on_died,
with the real client's facts and after its limits; the next request starts a new engine.

What the real engine gets from the operating system, a test asks for here: die() for a
crash (SIGKILL), hang() for an engine that stops responding (SIGSTOP), a Script per
answer, load_refusals for loads that fail. Its pids are numbers no process can have,
so nothing meant for the engine's process (priority, CPU time) reaches another one.

One deliberate difference: a request still in flight when shutdown() ends its engine
raises EngineCrashed here; the real client leaves it waiting for ever.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING

from app.core.answer_stats import FinishReason
from app.core.generation import GenerationSettings
from app.core.settings import DevicePreference, PromptLookupMode
from app.engine import protocol as p
from app.engine.answers.answer_common import AnswerTiming
from app.engine.failure_words import WINDOW, describe
from app.engine.failures import During, EngineStopped, Failure, Hang, NoModel
from app.hardware.report import HardwareReport
from app.service.models.client import HANG_AFTER_LOADING_S, HANG_AFTER_S, STOP_GRACE_S, STOP_LIMIT_S
from app.service.models.engine_errors import EngineCrashed, EngineDied, EngineError
from app.service.models.engine_handle import EngineHandle
from tests.hardware.machines import recorded_report
from tests.helpers.scripted_answers import (Script, ScriptedModel, answer_stats, count_prompt, load_model, plan_answer,
                                            tokenize)

# Above Linux's largest pid_max (2**22) and odd (Windows pids are multiples of 4).
_FIRST_PID = (1 << 23) + 1
_NEVER = float("inf")


class _Process:
    """One scripted engine "process": alive or not, hung or not, paused, and its model."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.alive = True
        self.exit_code: int | None = None
        self.hung_since: float | None = None  # when it went silent
        self.hang: Hang | None = None  # why Kestrel ended it, when it did
        self.silent_s = 0.0
        self.paused = False
        self.cancelled: set[int] = set()
        self.model: ScriptedModel | None = None
        self._changed = asyncio.Event()

    def poke(self) -> None:
        self._changed.set()

    def stopped(self, during: During) -> EngineStopped:
        """What the client raises into a request it was waiting on when this one ended."""
        return EngineStopped(self.exit_code, during, self.hang, self.silent_s)

    async def changed(self, timeout: float) -> None:
        """Until poke() or timeout. Not wait_for: Python 3.11's loses a cancel that comes
        with the poke (shutdown resumes the engine, then cancels the load)."""
        try:
            async with asyncio.timeout(None if timeout == _NEVER else max(0.0, timeout)):
                await self._changed.wait()
        except TimeoutError:
            pass
        self._changed.clear()


class ScriptedEngine:
    """The engine for fast service tests, behind EngineHandle (app/service/models/engine_handle.py).

    machine: the recorded machine (tests/fixtures/hardware) it reports and places
    models on. token_s, load_s: how long a token and a load take. gpu_offload: whether
    its pretend llama.cpp can use a GPU (this machine's cannot). The hang and stop limits
    are EngineClient's. scripts: the next answers' scripts, in order; then model_scripts
    by model file name; then default_script. load_refusals: the next loads' refusals.
    requests: every Load and Generate asked.
    """

    def __init__(self, *, machine: str = "linux_vm", token_s: float = 0.002, load_s: float = 0.0,
                 gpu_offload: bool = False, hang_after: float = HANG_AFTER_S,
                 hang_after_loading: float = HANG_AFTER_LOADING_S, stop_grace: float = STOP_GRACE_S,
                 stop_limit: float = STOP_LIMIT_S) -> None:
        self.machine, self.token_s, self.load_s, self.gpu_offload = machine, token_s, load_s, gpu_offload
        self.hang_after, self.hang_after_loading = hang_after, hang_after_loading
        self.stop_grace, self.stop_limit = stop_grace, stop_limit
        self.default_script = Script()
        self.scripts: deque[Script] = deque()
        self.model_scripts: dict[str, Script] = {}
        self.load_refusals: deque[Failure] = deque()
        self.holding_loads = False
        self.requests: list[p.Load | p.Generate] = []
        self.loaded: p.Loaded | None = None
        self.restarts = 0
        self.states_forgotten = 0
        self.prompt_lookup = PromptLookupMode.OFF
        self.on_died: Callable[[EngineDied], None] | None = None
        self._process: _Process | None = None
        self._report: HardwareReport | None = None
        self._last_load: p.Load | None = None
        self._current: int | None = None
        self._stop_asked_at: float | None = None
        self._loading = False
        self._ids = itertools.count(1)
        self._pids = itertools.count(_FIRST_PID, 2)

    # --- what EngineHandle asks ----------------------------------------------------------

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.alive else None

    @property
    def load_request(self) -> p.Load | None:
        return self._last_load

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.alive

    async def start(self) -> None:
        """Start an engine if none runs (a new pid; restarts counts the ones after the first)."""
        if self.running:
            return
        if self._process is not None:
            self.restarts += 1
        self._process = _Process(next(self._pids))
        await asyncio.sleep(0)

    async def load(self, model_path: str, *, context_length: int = 4096, threads: int | None = None,
                   device: DevicePreference = DevicePreference.AUTO, gpu_layers: int | None = None,
                   chat_template: str | None = None, state_ram_bytes: int = 0, state_dir: str | None = None,
                   state_disk_bytes: int = 0, projector_path: str | None = None) -> p.Loaded:
        await self.start()
        request = p.Load(next(self._ids), str(model_path), context_length, threads, device, gpu_layers,
                         chat_template, state_ram_bytes, state_dir, state_disk_bytes, projector_path)
        self.requests.append(request)
        self.loaded = None
        process = self._live(During.LOAD)
        self._loading = True
        try:
            process.model = None  # the engine lets the old model go first
            await self._work(process, During.LOAD, self.load_s, hold=lambda: self.holding_loads)
            if self.load_refusals:
                raise EngineError(self.load_refusals.popleft())
            model = process.model = load_model(request, self._machine(), gpu_offload=self.gpu_offload)
            if projector_path is not None:  # a projector always loads here (vision_problem is the real engine's)
                model.loaded = dataclasses.replace(model.loaded, vision=True)
        finally:
            self._loading = False
        self._last_load = request
        self.loaded = model.loaded
        return model.loaded

    async def hardware_report(self) -> HardwareReport:
        await self.start()
        await self._work(self._live(During.PROBE), During.PROBE)
        return self._machine()

    async def forget_states(self) -> None:
        self.states_forgotten += 1  # how often the service told it to drop its saved states
        if self.running:
            await self._work(self._live(During.FORGET_STATES), During.FORGET_STATES)

    async def count_tokens(self, text: str) -> int:
        """Words as tokens (scripted_answers.tokenize), at once, as the real engine counts beside answers."""
        self._counting_model()
        return len(tokenize(text))

    async def count_prompt(self, messages: Sequence[p.ChatMessage], *, thinking: bool = True) -> int:
        return count_prompt(self._counting_model(), messages, thinking)

    def _counting_model(self) -> ScriptedModel:
        process = self._process
        if process is None or not process.alive or process.model is None:
            raise EngineError(NoModel())
        return process.model

    async def reset(self) -> None:
        """Forget the cached conversation (EngineClient.reset)."""
        if self.running:
            process = self._live(During.RESET)
            await self._work(process, During.RESET)
            if process.model is not None:
                process.model.cached = []

    async def unload(self) -> None:
        if self.running:
            process = self._live(During.UNLOAD)
            await self._work(process, During.UNLOAD)
            process.model = None
        self.loaded = None

    async def shutdown(self, timeout: float = 5.0) -> None:
        """End the engine without on_died; a hung one is waited for as the real client waits
        for its ping to be answered."""
        self.cancel()
        process, self._process = self._process, None
        self.loaded = None
        if process is None:
            return
        if process.alive and process.hung_since is not None:
            await asyncio.sleep(min(self.stop_grace, timeout))
        if process.alive:
            process.alive, process.exit_code = False, 0 if process.hung_since is None else -9
        process.poke()

    async def generate(self, messages: Sequence[p.ChatMessage], settings: GenerationSettings | None = None, *,
                       stop: Sequence[str] = (), trim_history: bool = False, threads: int | None = None,
                       shape: p.AnswerShape | None = None, keep_state: bool = True) -> AsyncIterator[p.Delta | p.Done]:
        await self._ensure_loaded()
        request = p.Generate(next(self._ids), tuple(messages), settings or GenerationSettings(), tuple(stop),
                             trim_history, threads, self.prompt_lookup, shape or p.AnswerShape(), keep_state)
        self.requests.append(request)
        process = self._live(During.GENERATE)
        self._current = request.request_id
        finished = False
        try:
            async for event in self._answer(process, request):
                finished = isinstance(event, p.Done)
                yield event
                if finished:
                    return
        finally:
            if self._current == request.request_id:
                self._current = None
                self._stop_asked_at = None
            if not finished:
                process.cancelled.add(request.request_id)

    def cancel(self) -> None:
        if self._current is None:
            return
        process = self._process
        if process is not None and process.alive and process.hung_since is None:
            process.cancelled.add(self._current)
            process.paused = False  # a paused answer wakes up to see that it was cancelled
            process.poke()
        if self._stop_asked_at is None:
            self._stop_asked_at = time.monotonic()

    def pause(self) -> None:
        self._steer(paused=True)

    def resume(self) -> None:
        self._steer(paused=False)

    # --- what a test does to it ----------------------------------------------------------

    def die(self, exit_code: int = -9) -> None:
        """The engine process ends now, as if killed (SIGKILL: exit code -9)."""
        process = self._process
        if process is not None and process.alive:
            self._died(process, exit_code)

    def kill(self) -> None:
        """EngineClient.kill(): the engine stops at once, and on_died hears of it."""
        self.die()

    def hang(self) -> None:
        """The engine stops responding (SIGSTOP): nothing more comes, not even to a ping."""
        process = self._process
        if process is not None and process.alive and process.hung_since is None:
            process.hung_since = time.monotonic()
            process.poke()

    def hold_loads(self) -> None:
        """Loads from now on take until release_loads() (a big model on a slow disk)."""
        self.holding_loads = True

    def release_loads(self) -> None:
        self.holding_loads = False
        if self._process is not None:
            self._process.poke()

    @property
    def paused(self) -> bool:
        return self._process is not None and self._process.paused

    # --- the engine's side ---------------------------------------------------------------

    async def _answer(self, process: _Process, request: p.Generate) -> AsyncIterator[p.Delta | p.Done]:
        model = process.model
        if model is None:
            raise EngineError(NoModel())
        script = self._script_for(model)
        plan = plan_answer(model, request, script)
        timing, token_s = plan.timing, self.token_s if script.token_s is None else script.token_s
        finish, made = plan.finish, []
        try:
            for text, thinking in plan.pieces:
                await self._work(process, During.GENERATE, token_s)
                if timing.first is None:
                    timing.first = time.perf_counter()
                if request.request_id in process.cancelled:
                    finish = FinishReason.CANCELLED
                    break
                timing.generated += 1
                timing.last = time.perf_counter()
                self._time_thinking(timing, thinking)
                made.append(text)
                yield p.Delta(request.request_id, text, thinking)
                await self._after_token(process, script, timing.generated)
                more = timing.generated < len(plan.pieces)
                await self._work(process, During.GENERATE, hold=lambda: more and process.paused)
            for call in plan.calls if finish != FinishReason.CANCELLED else ():
                await self._work(process, During.GENERATE)
                yield p.Delta(request.request_id, "", tool_call=call)
        finally:
            model.cached = plan.prompt + tokenize("".join(made))
        await self._work(process, During.GENERATE)
        yield p.Done(request.request_id, answer_stats(model, plan, finish, script))

    async def _after_token(self, process: _Process, script: Script, made: int) -> None:
        if made == script.die_after:
            self._died(process, script.exit_code)
        if made == script.hang_after:
            self.hang()
        await asyncio.sleep(0)

    @staticmethod
    def _time_thinking(timing: AnswerTiming, thinking: bool) -> None:
        now = time.perf_counter()
        if thinking and timing.thinking_from is None:
            timing.thinking_from = timing.first or now
        elif not thinking and timing.thinking_from is not None and timing.thinking_to is None:
            timing.thinking_to = now

    async def _work(self, process: _Process, during: During, seconds: float = 0.0,
                    hold: Callable[[], bool] = lambda: False) -> None:
        """The engine busy for seconds (then while hold()); EngineCrashed if it dies meanwhile,
        and ended as the real client's watchdog ends it if it stops responding."""
        due = time.monotonic() + seconds
        while True:
            if not process.alive:
                await asyncio.sleep(0)  # on_died is told first, as the real client tells it
                raise EngineCrashed(process.stopped(during))
            now = time.monotonic()
            end_at, hang = self._watchdog(process, now)
            if now >= end_at:
                process.hang = hang
                process.silent_s = now - process.hung_since if hang == Hang.SILENT and process.hung_since else 0.0
                self._died(process, -9)
                continue
            if process.hung_since is None and now >= due and not hold():
                return
            await process.changed(min(end_at, due if process.hung_since is None and now < due else _NEVER) - now)

    def _watchdog(self, process: _Process, now: float) -> tuple[float, Hang | None]:
        """When EngineClient's watchdog would end this engine, and why (never: inf)."""
        stop_at, hung = self._stop_asked_at, process.hung_since
        ends: list[tuple[float, Hang | None]] = [(_NEVER, None)]
        if stop_at is not None:
            # A live engine has stop_limit to end the answer; a silent one, stop_grace to answer a ping.
            ends.append((stop_at + self.stop_limit, Hang.IGNORED_STOP))
            if hung is not None and hung <= stop_at:
                ends.append((stop_at + self.stop_grace, Hang.IGNORED_STOP))
        if hung is not None:
            ends.append((hung + (self.hang_after_loading if self._loading else self.hang_after), Hang.SILENT))
        return min(ends, key=lambda end: end[0])

    def _died(self, process: _Process, exit_code: int | None) -> None:
        process.alive, process.exit_code = False, exit_code
        asyncio.get_running_loop().call_soon(self._tell_died, process)
        process.poke()

    def _tell_died(self, process: _Process) -> None:
        if process is not self._process:
            return  # shut down, or already replaced: nobody is told
        self.loaded = None
        self._stop_asked_at = None
        if self.on_died is not None:
            self.on_died(EngineDied(process.exit_code, describe(process.stopped(During.IDLE), WINDOW),
                                    restart=process.hang == Hang.IGNORED_STOP))

    def _steer(self, *, paused: bool) -> None:
        process = self._process
        if process is not None and process.alive and process.hung_since is None:
            process.paused = paused
            process.poke()

    def _live(self, during: During) -> _Process:
        process = self._process
        if process is None or not process.alive:
            raise EngineCrashed(EngineStopped(None, during))
        return process

    async def _ensure_loaded(self) -> None:
        if self.running and self.loaded is not None:
            return
        last = self._last_load
        if last is None:
            raise EngineError(NoModel())
        await self.load(last.model_path, context_length=last.context_length, threads=last.threads,
                        device=last.device, gpu_layers=last.gpu_layers, chat_template=last.chat_template,
                        state_ram_bytes=last.state_ram_bytes, state_dir=last.state_dir,
                        state_disk_bytes=last.state_disk_bytes)

    def _script_for(self, model: ScriptedModel) -> Script:
        if self.scripts:
            return self.scripts.popleft()
        name = model.loaded.model_path.replace("\\", "/").rsplit("/", 1)[-1]
        return self.model_scripts.get(name, self.default_script)

    def _machine(self) -> HardwareReport:
        if self._report is None:
            self._report = recorded_report(self.machine)
        return self._report


if TYPE_CHECKING:
    def _scripted_engine_is_an_engine_handle(engine: ScriptedEngine) -> EngineHandle:
        """Never called: `mypy tests/helpers/scripted_engine.py` checks the members here;
        tests/service/test_engine_contract.py compares their signatures when tests run."""
        return engine
