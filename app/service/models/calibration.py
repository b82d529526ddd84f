"""The speed calibration: one short background answer of the loaded model when this CPU measured nothing yet.

The speed verdicts (app/hardware/speed.py) calibrate on what answers measured here; before
the first answer they can only estimate. So once a chat model is loaded and the thread
advisor holds no speed for this CPU, Kestrel asks the model for CALIBRATION_TOKENS tokens
of a fixed prompt, greedy, with the threads an answer would get, and records the answer's
speed as any answer's (ModelSession.learn_threads: threads.json and the verdicts); then the
library lists its verdicts again, now "measured". The answer is kept nowhere else.

A person never waits for it: it joins the engine's line as a request that gives way
(EngineQueue.request(gives_way=True)), so any chat, quick ask, API request, load or unload
that comes cancels it between two tokens and goes next. It runs at most once per model in
a run (a calibration a person's request displaced is not tried again: their own answers
measure instead), only while the engine runs at full speed (not paused for a hidden window,
not running gently, where it would measure a held-back engine) and not on battery saver,
never for an embedding model, and only where the front end turned it on (the window and
`kestrel serve`, whose threads.json outlives the run; not `kestrel chat`, which answers once
and would only wait for it before it exits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from app.core.answer_stats import FinishReason
from app.core.conversation import Role
from app.core.generation import GenerationSettings
from app.engine.protocol import ChatMessage, Done
from app.hardware.power import Power, read_power
from app.library.installed import InstalledModel
from app.service.event_bus import EventBus, TaskGroup
from app.service.events import Event, ModelState, ModelStateChanged, Pace, PaceChanged
from app.service.models.engine_errors import EngineError
from app.service.models.engine_queue import EngineRequest
from app.service.models.model_session import ModelSession
from app.service.settings_keeper import SettingsKeeper
from app.service.models.threads import MIN_TOKENS

# Enough tokens for a speed (the thread advisor ignores answers under MIN_TOKENS), few enough that
# prompt and answer stay under the engine's smallest saved chat state (64 tokens) and the burst is short.
CALIBRATION_TOKENS = max(24, MIN_TOKENS + 8)
# A neutral request that every chat model answers at length (no way to ignore the end token is in the
# protocol): prose, not a list or a count, whose repeats drafting from the prompt would speed up.
CALIBRATION_PROMPT = "Describe a walk along a river on a spring morning, in one long paragraph."
CALIBRATION_SETTINGS = GenerationSettings(temperature=0.0, top_p=1.0, top_k=1, repeat_penalty=1.0,
                                          max_tokens=CALIBRATION_TOKENS, seed=0, thinking=False)
# How long the engine stays free after a load before the calibration asks for it: a request sent with
# the load (a chat's own model, the first API request) goes first; while answers run it looks again.
SETTLE_S = 1.0


class SpeedCalibration:
    """Runs the calibration when a chat model is ready, the engine at full speed and nobody asking.

    It hears the model's state and the engine's pace on the bus; `measured` is awaited after a
    calibration recorded a speed (the library lists its verdicts again). `answers_busy`: whether a
    chat's or an API request's answer is written or waits (then it waits for a quiet moment).
    """

    def __init__(self, session: ModelSession, keeper: SettingsKeeper, bus: EventBus, tasks: TaskGroup, *,
                 answers_busy: Callable[[], bool], measured: Callable[[], Awaitable[None]],
                 power: Callable[[], Power] | None = None, settle_s: float = SETTLE_S) -> None:
        self._session = session
        self._keeper = keeper
        self._tasks = tasks
        self._answers_busy = answers_busy
        self._measured = measured
        self._power = power
        self._settle_s = settle_s
        self._tried: set[str] = set()  # the models calibrated (or displaced by a person) in this run
        self._task: asyncio.Task[None] | None = None
        self._request: EngineRequest | None = None
        self._paced_out = False
        bus.subscribe(self._heard)

    @property
    def running(self) -> bool:
        """A calibration holds or waits for the engine now."""
        return self._request is not None

    def _heard(self, event: Event) -> None:
        if isinstance(event, ModelStateChanged) and event.state == ModelState.READY:
            self._soon()
        elif isinstance(event, PaceChanged):
            if event.pace != Pace.FULL and self._request is not None:
                self._paced_out = True  # a held-back engine measures nothing true; tried again at full speed
                self._request.cancel()
            elif event.pace == Pace.FULL:
                self._soon()

    def _soon(self) -> None:
        if self._task is None or self._task.done():
            self._task = self._tasks.spawn(self._when_quiet())

    async def _when_quiet(self) -> None:
        """Waits for a quiet engine, then calibrates, unless calibrating no longer applies. On battery
        saver it gives up until the next load or the next return to full speed looks again."""
        while True:
            await asyncio.sleep(self._settle_s)
            if self._unwanted() is not None or (await asyncio.to_thread(self._power or read_power)).saver:
                return
            if self._answers_busy() or self._session.engine.busy:
                continue  # a person's answer measures too; if it was too short, the next quiet moment will
            model = self._session.model
            if self._unwanted() is not None or model is None:  # the power was read off the loop: look again
                return
            if not await self._calibrate(model):
                return

    def _unwanted(self) -> str | None:
        """Why no calibration is to run now (None: it may, once nobody asks for the engine)."""
        session, model = self._session, self._session.model
        if session.state != ModelState.READY or session.loaded is None or model is None:
            return "no model is ready"
        if not model.chats:
            return "an embedding model does not answer"
        if model.remote:  # its server answers: no speed of this machine's, and no request the person did not make
            return "a model on a server runs there"
        if model.id in self._tried:
            return "this model was calibrated in this run"
        if session.threads.measured_here():
            return "this machine measured a speed already"
        if session.pace.pace != Pace.FULL:
            return "the engine is paused or running gently"
        return None

    async def _calibrate(self, model: InstalledModel) -> bool:
        """One calibration; True when the pace held it back (it is to be tried again at full speed)."""
        session = self._session
        threads = session.answer_threads(self._keeper.settings)
        request = self._request = session.engine.request((ChatMessage(Role.USER, CALIBRATION_PROMPT),),
                                                         CALIBRATION_SETTINGS, threads=threads, gives_way=True)
        self._paced_out = False
        done: Done | None = None
        try:
            async for event in request.events():
                if isinstance(event, Done):
                    done = event
        except EngineError:
            pass  # the engine's end is said where it is heard (ModelSession); a speed is not worth more words
        finally:
            self._request = None
        if self._paced_out:
            return True
        self._tried.add(model.id)
        still = session.model
        if (done is None or done.stats.finish_reason == FinishReason.CANCELLED or still is None
                or still.id != model.id):
            return False
        session.learn_threads(done.stats)
        if done.stats.tokens >= MIN_TOKENS:
            await self._measured()
        return False
