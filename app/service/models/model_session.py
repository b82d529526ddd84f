"""The model session: which model the engine holds, loading and unloading it, and the engine's life."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from app.core.answer_stats import AnswerStats
from app.core.settings import Settings
from app.engine.protocol import Loaded
from app.engine.backends.resources import default_threads
from app.hardware.power import read_power
from app.library.installed import InstalledModel
from app.service.models import kv_cache
from app.service.models.background import EnginePace, WindowState
from app.service.models.engine_handle import EngineHandle
from app.service.models.engine_errors import EngineDied, EngineError
from app.service.models.engine_queue import EngineQueue
from app.service.event_bus import EventBus, TaskGroup
from app.service.events import (ActivityChanged, Event, ModelState, ModelStateChanged, Pace, PaceChanged,
                                Problem, ProblemSolved, ServingChanged)
from app.service.models.idle import UNLOADED_WORDS, IdleTimer, unload_after
from app.service.models.model_setup import ModelSetup
from app.service.models.priority import set_gentle
from app.service.settings_keeper import SettingsKeeper
from app.service.models.threads import BusyMeter, ThreadAdvisor, model_key


class ModelSession:
    """Owns the engine and the model in it, for every front end.

    `model` is the model loaded (or being loaded); `app_model` the app's choice, which
    a chat's own model replaces in the engine only while that chat is answered.
    `state`/`detail` say loading, ready, failed (and why), unloaded. Requests reach the
    engine through `engine`, a line in which they wait their turn. The engine's pace,
    the thread advice and the idle unload live here too: they are about the engine.

    It knows nothing of chats. `context_length()` says which context a load uses (the
    open chat's); `answers_busy()` whether any answer is written or waits (then nothing
    reloads or unloads); `answer_writing()` whether the engine is writing one now (then
    a dying engine's cut-off answer says so itself).
    """

    def __init__(self, client: EngineHandle, setup: ModelSetup, bus: EventBus, tasks: TaskGroup,
                 keeper: SettingsKeeper, *, context_length: Callable[[], int], answers_busy: Callable[[], bool],
                 answer_writing: Callable[[], bool], threads_file: Path | None) -> None:
        self.client = client
        self.engine = EngineQueue(client)
        self.setup = setup
        self._bus = bus
        self._serving = False
        self._tasks = tasks
        self._keeper = keeper
        self._context_length = context_length
        self._answers_busy = answers_busy
        self._answer_writing = answer_writing
        self.model: InstalledModel | None = None
        self.app_model: InstalledModel | None = None
        self.state = ModelState.NONE
        self.detail = ""
        self.load_error: EngineError | None = None
        self._engine_trouble = False  # an engine failure was said; a new engine answering ends it
        self._moved: asyncio.Future[None] | None = None
        self.pace = EnginePace(client, read_power, set_gentle)
        self.idle_timer = IdleTimer(lambda: unload_after(keeper.settings), self._unload_idle, tasks.spawn)
        self.busy_meter = BusyMeter(lambda: [os.getpid(), *([client.pid] if client.pid else [])])
        self.threads = ThreadAdvisor(threads_file, cores=default_threads(), busy=self.busy_meter.look)
        bus.subscribe(self._heard)
        client.on_died = self._engine_died

    @property
    def loaded(self) -> Loaded | None:
        """Where the engine runs the model now (None while none is loaded)."""
        return self.client.loaded

    @property
    def chat_defaults_model(self) -> InstalledModel | None:
        """The model whose own defaults a new chat takes."""
        return self.app_model or self.model

    def is_app_model(self, model: InstalledModel) -> bool:
        return self.app_model is not None and self.app_model.id == model.id

    def _heard(self, event: Event) -> None:
        if isinstance(event, Problem) and event.kind == "engine":
            self._engine_trouble = True

    # --- loading ------------------------------------------------------------------------

    async def load_model(self, model: InstalledModel, *, for_chat: bool = False) -> bool:
        """Load a model in the engine; the state says loading, ready or failed and why.

        for_chat: a chat's own model, loaded to answer it; otherwise the model becomes
        the app's (the default for new starts and for chats on the default model).
        """
        self.model = model
        if not for_chat:
            self.app_model = model
        self.load_error = None
        if model.missing:
            self.set_state(ModelState.FAILED, f"{model.title} is not at {model.path} now. Reconnect "
                           "the drive it is on, or choose another model.")
            return False
        self.set_state(ModelState.LOADING, f"Loading {model.title}…")
        try:
            async with self.engine.exclusive():
                await self._load(model, self._context_length())
        except EngineError as exc:
            self.load_error = exc
            self.set_state(ModelState.FAILED, exc.message)
            return False
        self.pace.loaded()
        self.busy_meter.look()
        self.set_state(ModelState.READY, model.title)
        if self._engine_trouble:
            self._engine_trouble = False
            self._bus.emit(ProblemSolved("engine"))
        self.idle_timer.restart()
        if not for_chat:
            await self._keeper.save(dataclasses.replace(self._keeper.settings, default_model=model.id))
        return True

    async def load_default(self, chosen_id: str | None) -> None:
        """Kestrel's start: the default model (`chosen_id`, else the oldest), or the starter model set
        up first where there is none; the state says no model when neither can be had."""
        setup = self.setup
        model = await asyncio.to_thread(setup.library.default, chosen_id)
        if model is None and setup.starter_available():
            self.set_state(ModelState.INSTALLING, "Setting up the starter model…")
            if (model := await setup.install_starter()) is None:
                self.set_state(ModelState.NONE, setup.last_problem or "")
                return
        if model is None:
            self.set_state(ModelState.NONE, "No model yet.")
            return
        await self.load_model(model)

    async def reload(self) -> bool:
        """Load the model again as it was loaded: a chat's own model stays that chat's."""
        if self.model is None:
            return False
        return await self.load_model(self.model, for_chat=not self.is_app_model(self.model))

    async def _load(self, model: InstalledModel, context_length: int) -> None:
        """Load with the model's own settings over the app's (the chat's context over both)."""
        own, settings = model.defaults, self._keeper.settings
        self.client.prompt_lookup = own.prompt_lookup or settings.prompt_lookup
        ram, folder, disk = kv_cache.load_options(settings.saved_states_mb)
        await self.client.load(model.location, context_length=context_length, threads=settings.threads,
                               device=own.device_preference or settings.device_preference,
                               gpu_layers=own.gpu_layers, chat_template=own.chat_template,
                               state_ram_bytes=ram, state_dir=folder, state_disk_bytes=disk,
                               projector_path=str(model.projector) if model.projector else None)

    async def ensure_context(self, context_length: int) -> None:
        """Reload with this context if the model was loaded with another."""
        # Compared with what was asked, not what the engine gave: a model trained on less
        # context is clamped, and must not be reloaded before every answer.
        asked = self.client.load_request
        if asked is not None and self.model is not None and asked.context_length != context_length:
            self._bus.emit(ActivityChanged("Reloading the model with the new context length…"))
            async with self.engine.exclusive():
                await self._load(self.model, context_length)
            self.set_state(ModelState.READY, self.detail)

    def replace_model(self, model: InstalledModel) -> bool:
        """The library changed this model (its settings): hold the new value. True if it is
        the one loaded (or being loaded)."""
        if self.app_model is not None and self.app_model.id == model.id:
            self.app_model = model
        if self.model is not None and self.model.id == model.id:
            self.model = model
            return True
        return False

    async def unload_model(self) -> None:
        """Give the model's memory back now and load none (it is being removed)."""
        async with self.engine.exclusive():
            await self.client.unload()
        if self.app_model is not None and self.model is not None and self.app_model.id == self.model.id:
            self.app_model = None
        self.model = None
        self.set_state(ModelState.NONE, "No model loaded. Choose one in the model manager.")

    async def clear_saved_states(self) -> None:
        """The settings' "clear saved chat states": the engine's RAM copies, then the files."""
        async with self.engine.exclusive():
            await self.client.forget_states()
        await asyncio.to_thread(kv_cache.clear)

    # --- state --------------------------------------------------------------------------

    def set_state(self, state: ModelState, detail: str) -> None:
        self.state, self.detail = state, detail
        self._bus.emit(ModelStateChanged(state, detail, self.client.loaded if state == ModelState.READY else None))
        moved, self._moved = self._moved, None
        if moved is not None and not moved.done():
            moved.set_result(None)

    async def moves(self) -> None:
        """Until the model's state next changes."""
        if self._moved is None:
            self._moved = self._tasks.loop.create_future()
        await asyncio.shield(self._moved)

    async def _unload_idle(self) -> None:
        """No answer for a while: give the model's memory back (and the engine's, if chosen)."""
        if self._answers_busy() or self.state != ModelState.READY or unload_after(self._keeper.settings) is None:
            return
        async with self.engine.exclusive():
            if self._answers_busy() or self.state != ModelState.READY:
                return  # a message came while this waited for the engine
            # Said first: a message sent while the model unloads waits for it to load again
            # (load_model waits for this exclusive hold to end).
            self.set_state(ModelState.UNLOADED, UNLOADED_WORDS)
            if self._keeper.settings.exit_engine_when_idle:
                await self.client.shutdown()
            else:
                await self.client.unload()

    def _engine_died(self, died: EngineDied) -> None:
        """The engine ended by itself, or was ended as hung: say so now, not on the next
        send. One that ignored Stop is started again at once."""
        self._engine_trouble = True
        # The model failed now because its engine died, not because it would not load:
        # the next request loads it again (a load failing since keeps its own error).
        self.load_error = None
        if died.restart and self.model is not None:
            if not self._answer_writing():  # an answer it cut off says so itself
                self._bus.emit(Problem(died.message, "engine"))
            self._tasks.spawn(self.reload())
            return
        self.set_state(ModelState.FAILED, died.message)

    # --- the window and the settings ------------------------------------------------------

    def set_window_state(self, window: WindowState) -> bool:
        """Pause, slow or free the engine as the settings say for this window state; True
        (and PaceChanged) if the pace changed."""
        settings = self._keeper.settings
        if not self.pace.update(window, when_hidden=settings.when_hidden,
                                when_in_background=settings.when_in_background):
            return False
        self._bus.emit(PaceChanged(self.pace.pace, self.pace.words() or ""))
        return True

    def set_serving(self, serving: bool) -> None:
        """An API answer runs (True) or the last one ended: while one runs the engine is
        never held for a hidden window, only slowed (another program waits for it), and the
        documents service's indexing waits (ServingChanged)."""
        if serving != self._serving:
            self._serving = serving
            self._bus.emit(ServingChanged(serving))
        if self.pace.serve(serving):
            self._bus.emit(PaceChanged(self.pace.pace, self.pace.words() or ""))

    async def settings_changed(self, before: Settings, after: Settings) -> None:
        """The app's settings changed: a new idle wait counts from now, and a new device,
        thread count or saved-state budget loads the model again (once no answer runs), as does
        a policy that now keeps the model loaded (quick ask's keep_model_ready) after it was
        unloaded for being idle."""
        if unload_after(before) != unload_after(after) and not self._answers_busy():
            self.idle_timer.restart()
        if self.model is not None:
            self.client.prompt_lookup = self.model.defaults.prompt_lookup or after.prompt_lookup
        moved = (before.device_preference, before.threads, before.saved_states_mb) != (
            after.device_preference, after.threads, after.saved_states_mb)
        kept_loaded = unload_after(after) is None and unload_after(before) is not None
        moved = moved or (kept_loaded and self.state == ModelState.UNLOADED)
        if moved and self.model is not None and not self._answers_busy():
            await self.reload()

    def answer_threads(self, settings: Settings) -> int:
        """The CPU threads for the next answer of the loaded model, for every front end (the window, the
        CLI, the API server): the count set in Settings, else the physical cores other programs leave
        free now (the advisor, stepped down after a collapse), halved while running gently when the
        person chose that."""
        threads = self.threads.choose(self._model_key(), settings.threads).threads
        if self.pace.pace == Pace.GENTLE and settings.gentle_fewer_threads:
            threads = max(1, threads // 2)  # as the person chose: gentler still
        return threads

    def learn_threads(self, stats: AnswerStats | None) -> None:
        """An answer's speed teaches the thread advisor (kept in threads.json, written off the loop)."""
        self.busy_meter.look()  # the quiet spell before the next answer counts from here
        if stats is None or not stats.threads:
            return
        if not stats.device.startswith("CPU"):
            # Decoded on a GPU or an NPU, wholly or in part: its speed says nothing of the CPU threads (the
            # advisor's step-down) nor of the CPU's rate (the speed prediction calibrates on this record).
            return
        self.threads.record(self._model_key(), stats.threads, stats.tokens, stats.tokens_per_s)
        self._tasks.spawn(asyncio.to_thread(self.threads.save, self.threads.snapshot()))

    def _model_key(self) -> str:
        model = self.model
        return model_key(model.path, model.size) if model is not None else ""

    def stop_for_shutdown(self) -> None:
        """Kestrel is closing: a paused engine must be able to finish, and its end is no news."""
        self.setup.cancel()
        self.client.on_died = None
        self.client.resume()
