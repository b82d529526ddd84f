"""ChatController: what every front end does with chats, models and the engine, in plain asyncio."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.conversation import Conversation, Message, Role
from app.core.generation import GenerationSettings
from app.core.history import HistoryDamaged, HistoryError, HistoryStore
from app.core.history_repair import Replacement
from app.core.settings import Settings, SettingsError
from app.engine.protocol import Loaded
from app.engine.resources import default_threads
from app.library.models import InstalledModel, ModelLibrary
from app.hardware.power import read_power
from app.service import kv_cache
from app.service.answer_run import AnswerRun
from app.service.background import EnginePace, Pace, WindowState
from app.service.idle import UNLOADED_WORDS, IdleTimer
from app.service.threads import BusyMeter, ThreadAdvisor, model_key
from app.service.client import EngineClient, EngineDied, EngineError
from app.service.engine_queue import EngineQueue
from app.service.events import (ActivityChanged, BusyChanged, ConversationChanged, ConversationOpened,
                                ConversationRemoved, ConversationsListed, DamagedHistoryFound,
                                DamagedHistoryReplaced, Event, MessageAdded, MessagesRemoved, ModelState,
                                ModelStateChanged, PaceChanged, Problem, SettingsChanged)
from app.service.library_service import LibraryService
from app.service.model_setup import ModelSetup
from app.service.priority import set_gentle
from app.service.storage import Storage

if TYPE_CHECKING:
    from app.service.downloads import DownloadQueue

Listener = Callable[[Event], None]


class ChatController:
    """Conversations, the model's state, and answers streamed into the history.

    Front ends (the window, the CLI, later the API server) call its methods and hear
    back through events (`subscribe`); none of them touches the history, the settings
    file or the engine itself. One engine serves them all through `engine`, a line in
    which requests wait their turn.

    Attributes a front end may read: `settings`, `conversation` (the open one, or None
    for a new chat), `messages` (its messages), `model`, `model_state`, `model_detail`,
    `busy` (an answer is being written), `queued` (a message waits for the model).
    """

    def __init__(self, *, history_path: Path, settings_path: Path | None, library: ModelLibrary,
                 client: EngineClient, settings: Settings | None = None) -> None:
        self._history_path = history_path
        self._settings_path = settings_path
        self._given_settings = settings
        self.client = client
        self.engine = EngineQueue(client)
        self.setup = ModelSetup(library, self._emit)
        self.library = LibraryService(self, self._emit)
        self.storage: Storage | None = None
        self.settings = settings or Settings()
        self.conversation: Conversation | None = None
        self.messages: list[Message] = []
        self.model: InstalledModel | None = None
        self.model_state = ModelState.NONE
        self.model_detail = ""
        self.load_error: EngineError | None = None
        self.busy = False
        self.queued = False
        self._listeners: list[Listener] = []
        self._tasks: set[asyncio.Task] = set()
        self._answer_task: asyncio.Task | None = None
        self._run: AnswerRun | None = None
        self.pace = EnginePace(self.client, read_power, set_gentle)
        self.idle_timer = IdleTimer(lambda: self.settings.unload_after_minutes, self._unload_idle_model, self.spawn)
        self.busy_meter = BusyMeter(lambda: [os.getpid(), *([self.client.pid] if self.client.pid else [])])
        self.threads = ThreadAdvisor(settings_path.parent / "threads.json" if settings_path else None,
                                     cores=default_threads(), busy=self.busy_meter.look)
        self._idle = asyncio.Event()
        self._idle.set()
        self._replacing_history = False
        # The loop the front end runs; slots called outside a coroutine (a button) start
        # tasks on it.
        self._loop = asyncio.get_event_loop()
        client.on_died = self._engine_died

    # --- events -------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call listener with every event from now on; returns what unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _emit(self, event: Event) -> None:
        for listener in list(self._listeners):
            listener(event)

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run a coroutine on the controller's loop, keeping it until it ends."""
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- start-up and models --------------------------------------------------------------

    async def open(self) -> None:
        """Open the history and read the settings (off the event loop).

        A damaged history file is left as it is, reported (DamagedHistoryFound) and
        replaced by one in memory until the user chooses (recover_history or
        start_fresh_history); everything else goes on. HistoryError if the history
        cannot be used for another reason; the message is for the user.
        """
        # A large history from an older Kestrel is migrated here (an index is built):
        # seconds, on the writer thread, with the window already up.
        self._emit(ActivityChanged("Opening your chats…"))
        self.storage = await Storage.open(self._history_path, self._settings_path)
        self.storage.on_damaged = self._history_damaged
        self._emit(ActivityChanged("Idle"))
        if self._given_settings is None:
            self.settings = self.storage.settings
        self._emit(SettingsChanged(self.settings))
        if self.storage.settings_problem:
            self._emit(Problem(self.storage.settings_problem))
        if self.storage.history_damage is not None:
            self._history_damaged(self.storage.history_damage)
        await self.storage.run(self.threads.load)
        if self._settings_path is not None and self.library.downloads is None:
            await self.library.open_downloads(self._settings_path.parent / "downloads.json")

    @property
    def history_damage(self) -> HistoryDamaged | None:
        """The damage found in the history file, until the user chose what to do."""
        return self.storage.history_damage if self.storage is not None else None

    def _history_damaged(self, damage: HistoryDamaged) -> None:
        in_memory = self.storage is not None and self.storage.in_memory
        self._emit(DamagedHistoryFound(_damage_text(damage, in_memory), damage.path, in_memory))

    async def recover_history(self) -> bool:
        """The user's choice for a damaged history: what SQLite can still read of it goes
        into a fresh one; the damaged file is kept, unchanged, under a new name."""
        return await self._replace_damaged_history(recover=True)

    async def start_fresh_history(self) -> bool:
        """The user's choice for a damaged history: a new, empty one (with the chats
        written meanwhile); the damaged file is kept, unchanged, under a new name."""
        return await self._replace_damaged_history(recover=False)

    async def _replace_damaged_history(self, recover: bool) -> bool:
        storage = self._storage()
        if storage.history_damage is None or self._replacing_history:
            return False
        if self.busy or self.queued or self._run is not None:
            self._emit(Problem("Wait until the answer is finished (or stop it), then choose again."))
            return False
        self._replacing_history = True
        open_id = self.conversation.id if self.conversation is not None else None
        was_in_memory = storage.in_memory
        self.new_conversation()  # its id may not mean the same chat in the new history
        self._emit(ActivityChanged("Recovering your chats…" if recover else "Starting a fresh history…"))
        try:
            done = await storage.replace_damaged_history(recover)
        except HistoryError as exc:
            self._emit(Problem(str(exc)))
            if open_id is not None:
                await self.open_conversation(open_id)
            return False
        finally:
            self._replacing_history = False
            self._emit(ActivityChanged("Idle"))
        conversations = await self._history_or_problem(HistoryStore.list_conversations) or []
        self._emit(ConversationsListed(tuple(conversations)))
        reopen = done.carried.get(open_id) if was_in_memory and open_id is not None else open_id
        if reopen is not None and any(c.id == reopen for c in conversations):
            await self.open_conversation(reopen)
        self._emit(DamagedHistoryReplaced(_replaced_text(done, recover), done.aside, done.conversations,
                                          done.messages))
        return True

    async def start_up(self) -> None:
        """The window's start: open, recover, list chats, then find and load a model."""
        await self.open()
        recovered = await self._history_or_problem(HistoryStore.recover_interrupted) or 0
        conversations = await self._history_or_problem(HistoryStore.list_conversations) or []
        self._emit(ConversationsListed(tuple(conversations)))
        if conversations:
            await self.open_conversation(conversations[0].id)
        else:
            self.new_conversation()
        if recovered:
            self._emit(Problem(f"{recovered} answer(s) were cut off when Kestrel last closed; "
                               "they are kept and marked as interrupted."))
        model = await asyncio.to_thread(self.setup.library.default, self.settings.default_model)
        if model is None and self.setup.starter_available():
            self._set_model_state(ModelState.INSTALLING, "Setting up the starter model…")
            model = await self.setup.install_starter()
            if model is None:
                self._set_model_state(ModelState.NONE, self.setup.last_problem or "")
                return
        if model is None:
            self._set_model_state(ModelState.NONE, "No model yet.")
            return
        await self.load_model(model)

    async def load_model(self, model: InstalledModel) -> bool:
        """Load a model in the engine; the state says loading, ready or failed and why."""
        self.model = model
        self.load_error = None
        if model.missing:
            self._set_model_state(ModelState.FAILED, f"{model.title} is not at {model.path} now. Reconnect "
                                  "the drive it is on, or choose another model.")
            return False
        self._set_model_state(ModelState.LOADING, f"Loading {model.title}…")
        try:
            async with self.engine.exclusive():
                await self._load(model, self._context_length())
        except EngineError as exc:
            self.load_error = exc
            self._set_model_state(ModelState.FAILED, exc.message)
            self._give_up_queued()
            return False
        self.pace.loaded()
        self.busy_meter.look()
        self._set_model_state(ModelState.READY, model.title)
        self.idle_timer.restart()
        await self.save_settings(dataclasses.replace(self.settings, default_model=model.id))
        if self.queued:
            self.queued = False
            self._start_answer()
        return True

    async def import_model(self, path: str) -> bool:
        """Check and copy a model the user picked into the library, then load it."""
        model = await self.setup.import_model(path)
        if model is None:
            self._emit(Problem(self.setup.last_problem or "The model was not imported."))
            return False
        return await self.load_model(model)

    @property
    def downloads(self) -> DownloadQueue | None:
        """The window's download queue (None until open(), and in the CLI's chat)."""
        return self.library.downloads

    async def unload_model(self) -> None:
        """Give the model's memory back now and load none (it is being removed)."""
        async with self.engine.exclusive():
            await self.client.unload()
        self.model = None
        self._set_model_state(ModelState.NONE, "No model loaded. Choose one in the model manager.")

    @property
    def loaded(self) -> Loaded | None:
        """Where the engine runs the model now (None while none is loaded)."""
        return self.client.loaded

    def _set_model_state(self, state: ModelState, detail: str) -> None:
        self.model_state, self.model_detail = state, detail
        self._emit(ModelStateChanged(state, detail, self.client.loaded if state == ModelState.READY else None))

    def _context_length(self) -> int:
        if self.conversation is not None:
            return self.conversation.settings.context_length
        return self._new_chat_settings().context_length

    async def _load(self, model: InstalledModel, context_length: int) -> None:
        """Load with the model's own settings over the app's (the chat's context over both)."""
        own = model.defaults
        self.client.prompt_lookup = own.prompt_lookup or self.settings.prompt_lookup
        ram, folder, disk = kv_cache.load_options(self.settings.saved_states_mb)
        await self.client.load(str(model.path), context_length=context_length, threads=self.settings.threads,
                               device=own.device_preference or self.settings.device_preference,
                               gpu_layers=own.gpu_layers, chat_template=own.chat_template,
                               state_ram_bytes=ram, state_dir=folder, state_disk_bytes=disk)

    async def clear_saved_states(self) -> None:
        """The settings' "clear saved chat states": the engine's RAM copies, then the files."""
        async with self.engine.exclusive():
            await self.client.forget_states()
        await asyncio.to_thread(kv_cache.clear)

    def _new_chat_system_prompt(self) -> str:
        own = self.model.defaults.system_prompt if self.model is not None else None
        return own or ""

    def _new_chat_settings(self) -> GenerationSettings:
        """A new chat's settings: the model's own defaults over the app's."""
        if self.model is None:
            return self.settings.generation
        return self.model.defaults.generation(self.settings.generation)

    def _engine_died(self, died: EngineDied) -> None:
        """The engine ended by itself, or was ended as hung: say so now, not on the next
        send. One that ignored Stop is started again at once."""
        if died.restart and self.model is not None:
            if not self.answering:  # an answer it cut off says so itself
                self._emit(Problem(died.message))
            self.spawn(self.load_model(self.model))
            return
        self._set_model_state(ModelState.FAILED, died.message)

    # --- conversations --------------------------------------------------------------------

    def new_conversation(self) -> None:
        """An empty chat; it is saved when its first message is sent."""
        self.conversation = None
        self.messages = []
        self._emit(ConversationOpened(None, ()))

    async def open_conversation(self, conversation_id: int) -> None:
        """Show a saved chat (read on the writer thread)."""
        storage = self._storage()
        try:
            conversation = await storage.history(HistoryStore.get_conversation, conversation_id)
            messages = await storage.history(HistoryStore.messages, conversation_id)
        except HistoryError as exc:
            self._emit(Problem(str(exc)))
            return
        stream = self._run.stream if self._run is not None else None
        if stream is not None and stream.message.conversation_id == conversation_id:
            # The history holds the answer as of its last save; show all that arrived.
            messages = [dataclasses.replace(m, text=stream.text) if m.id == stream.message_id else m
                        for m in messages]
        self.conversation, self.messages = conversation, messages
        self._emit(ConversationOpened(conversation, tuple(messages)))

    async def rename_conversation(self, conversation_id: int, title: str) -> bool:
        """Give a chat a new title; its place in the list stays."""
        title = title.strip()
        if not title:
            return False
        storage = self._storage()
        try:
            await storage.history(HistoryStore.rename_conversation, conversation_id, title)
            conversation = await storage.history(HistoryStore.get_conversation, conversation_id)
        except HistoryError as exc:
            self._emit(Problem(str(exc)))
            return False
        if self.conversation is not None and self.conversation.id == conversation_id:
            self.conversation = conversation
        self._emit(ConversationChanged(conversation, to_top=False))
        return True

    async def delete_conversation(self, conversation_id: int) -> bool:
        """Delete a chat and its messages (not while its answer is being written)."""
        stream = self._run.stream if self._run is not None else None
        if stream is not None and stream.message.conversation_id == conversation_id:
            self._emit(Problem("Stop the answer before deleting this chat."))
            return False
        try:
            await self._storage().history(HistoryStore.delete_conversation, conversation_id)
        except HistoryError as exc:
            self._emit(Problem(str(exc)))
            return False
        self._emit(ConversationRemoved(conversation_id))
        if self.conversation is not None and self.conversation.id == conversation_id:
            self.new_conversation()
        return True

    def conversation_settings(self) -> tuple[str, GenerationSettings]:
        """The open chat's system prompt and generation settings (the defaults for a new one)."""
        if self.conversation is None:
            return self._new_chat_system_prompt(), self._new_chat_settings()
        return self.conversation.system_prompt, self.conversation.settings

    async def set_conversation_settings(self, system_prompt: str, settings: GenerationSettings) -> bool:
        """Change the open chat's system prompt and settings (saving a new chat first)."""
        try:
            conversation_id = await self._ensure_conversation("New chat")
            storage = self._storage()
            await storage.history(HistoryStore.update_conversation, conversation_id,
                                  system_prompt=system_prompt, settings=settings)
            await self._refresh_conversation(conversation_id)
        except HistoryError as exc:
            self._emit(Problem(str(exc)))
            return False
        return True

    async def search(self, query: str) -> set[int] | None:
        """The ids of the chats whose title or messages contain query (None: no filter)."""
        query = query.strip()
        if not query:
            return None
        found = await self._history_or_problem(HistoryStore.search_conversations, query)
        return {c.id for c in found} if found is not None else None

    async def _ensure_conversation(self, title: str) -> int:
        if self.conversation is None:
            storage = self._storage()
            self.conversation = await storage.history(
                HistoryStore.create_conversation, title=title, system_prompt=self._new_chat_system_prompt(),
                settings=self._new_chat_settings(), model=self.model.id if self.model else None)
            self._emit(ConversationChanged(self.conversation))
        return self.conversation.id

    async def _refresh_conversation(self, conversation_id: int) -> Conversation:
        conversation = await self._storage().history(HistoryStore.get_conversation, conversation_id)
        if self.conversation is not None and self.conversation.id == conversation_id:
            self.conversation = conversation
        self._emit(ConversationChanged(conversation))
        return conversation

    # --- sending and answers --------------------------------------------------------------

    def send(self, text: str) -> bool:
        """Add the user's message and start the answer (or queue it while a model loads).

        False if it cannot be taken now (an answer is being written, or no text).
        """
        if self.busy or not text.strip() or self.storage is None:
            return False
        # Busy at once: the Send button turns into Stop before the message is saved.
        self._set_busy(True)
        self.spawn(self._send(storable(text)))
        return True

    async def _send(self, text: str) -> None:
        try:
            conversation_id = await self._ensure_conversation(_title_from(text))
            message = await self._storage().history(HistoryStore.add_message, conversation_id, Role.USER, text)
            await self._refresh_conversation(conversation_id)
        except HistoryError as exc:
            self._emit(Problem(str(exc)))
            self._set_busy(False)
            return
        except Exception as exc:  # noqa: BLE001 - a bug must not leave the window busy for ever
            self._emit(Problem(f"Kestrel could not send the message ({type(exc).__name__}: {exc}). "
                               "It was not saved; please report this."))
            self._set_busy(False)
            return
        self._add_to_open(message)
        self._start_answer()

    def regenerate(self) -> bool:
        """Replace the last answer with a new one."""
        if self.busy or not self.messages or self.messages[-1].role != Role.ASSISTANT:
            return False
        self._set_busy(True)
        self.spawn(self._replace_from(self.messages[-1], None))
        return True

    def edit_and_resend(self, message_id: int, text: str) -> bool:
        """Change one of the user's messages; the answers after it are replaced."""
        if self.busy or not text.strip() or self.conversation is None:
            return False
        message = next((m for m in self.messages if m.id == message_id), None)
        if message is None or message.role != Role.USER:
            return False
        self._set_busy(True)
        self.spawn(self._replace_from(message, storable(text)))
        return True

    async def _replace_from(self, first: Message, new_text: str | None) -> None:
        storage = self._storage()
        try:
            await storage.history(HistoryStore.delete_messages_from, first.conversation_id, first.id)
            self._remove_from(first)
            if new_text is not None:
                added = await storage.history(HistoryStore.add_message, first.conversation_id, Role.USER, new_text)
                self._add_to_open(added)
        except (HistoryError, KeyError) as exc:
            self._emit(Problem(str(exc) if isinstance(exc, HistoryError) else "That message is gone."))
            self._set_busy(False)
            return
        self._start_answer()

    def stop(self) -> None:
        """Stop the answer (what was written stays), or forget a message waiting for the model."""
        if self.queued:
            self.queued = False
            self._emit(ActivityChanged("Idle"))
            self._update_idle()
        if self._run is not None:
            self._run.cancel()

    @property
    def answering(self) -> bool:
        """True while the engine is writing this controller's answer (not waiting in line)."""
        return self._run is not None and self._run.running

    async def wait_idle(self) -> None:
        """Until no answer is being written and none waits for the model."""
        await self._idle.wait()

    def _start_answer(self) -> None:
        if self.model_state == ModelState.READY:
            self.idle_timer.stop()
            self._set_busy(True)
            assert self.conversation is not None
            threads = self.threads.choose(self._model_key(), self.settings.threads).threads
            if self.pace.pace == Pace.GENTLE and self.settings.gentle_fewer_threads:
                threads = max(1, threads // 2)  # as the user chose: gentler still
            run = self._run = AnswerRun(self._storage(), self.engine, self._emit, show=self._add_to_open,
                                        settle=self._replace_in_open,
                                        activity=self.pace.words() or "Thinking…", threads=threads)
            self._answer_task = self.spawn(self._answer(run, self.conversation.id))
            return
        self.queued = True
        self._set_busy(False)
        waiting = self.model_state in (ModelState.LOADING, ModelState.INSTALLING)
        if self.model is not None and (self.model_state == ModelState.UNLOADED or
                                       self.model_state == ModelState.FAILED and self.load_error is None):
            # Unloaded when idle, or the engine died (not the model): it loads for this message.
            self.spawn(self.load_model(self.model))
            waiting = True
        if waiting:
            self._emit(ActivityChanged("Your message will be sent when the model is ready…"))
        else:
            self._give_up_queued()

    def _give_up_queued(self) -> None:
        if self.queued:
            self.queued = False
            self._emit(Problem("No model is ready: import a model file, or fix the problem shown "
                               "in the status bar. Your message is kept."))
            self._update_idle()

    async def _answer(self, run: AnswerRun, conversation_id: int) -> None:
        try:
            await run.run(conversation_id, self._ensure_context)
        finally:
            self._run = None
            self._set_busy(False)
            self.idle_timer.restart()
            self._learn_threads(run.finished)
        try:
            await self._refresh_conversation(conversation_id)  # it moves to the top
        except (HistoryError, KeyError):
            pass  # Deleted meanwhile, or the disk problem was already shown.

    def _model_key(self) -> str:
        return model_key(self.model.path, self.model.size) if self.model is not None else ""

    def _learn_threads(self, answer: Message | None) -> None:
        """An answer's speed teaches the thread advisor (saved on the writer thread)."""
        self.busy_meter.look()  # the quiet spell before the next answer counts from here
        stats = answer.stats if answer is not None else None
        if not stats or not stats.get("threads") or self.storage is None:
            return
        self.threads.record(self._model_key(), int(stats["threads"]), int(stats.get("tokens", 0)),
                            float(stats.get("tokens_per_s", 0.0)))
        self.spawn(self.storage.run(self.threads.save))

    async def _unload_idle_model(self) -> None:
        """No answer for a while: give the model's memory back (and the engine's, if chosen)."""
        if self.busy or self.queued or self.model_state != ModelState.READY:
            return
        async with self.engine.exclusive():
            if self.busy or self.queued or self.model_state != ModelState.READY:
                return  # a message came while this waited for the engine
            # Said first: a message sent while the model unloads waits for it to load again
            # (load_model waits for this exclusive hold to end).
            self._set_model_state(ModelState.UNLOADED, UNLOADED_WORDS)
            if self.settings.exit_engine_when_idle:
                await self.client.shutdown()
            else:
                await self.client.unload()

    async def _ensure_context(self, context_length: int) -> None:
        # Compared with what was asked, not what the engine gave: a model trained on less
        # context is clamped, and must not be reloaded before every answer.
        asked = self.client.load_request
        if asked is not None and self.model is not None and asked.context_length != context_length:
            self._emit(ActivityChanged("Reloading the model with the new context length…"))
            async with self.engine.exclusive():
                await self._load(self.model, context_length)
            self._set_model_state(ModelState.READY, self.model_detail)

    def _add_to_open(self, message: Message) -> None:
        if self.conversation is not None and message.conversation_id == self.conversation.id:
            self.messages.append(message)
            self._emit(MessageAdded(message))

    def _replace_in_open(self, message: Message) -> None:
        for row, shown in enumerate(self.messages):
            if shown.id == message.id:
                self.messages[row] = message

    def _remove_from(self, first: Message) -> None:
        if self.conversation is not None and first.conversation_id == self.conversation.id:
            self.messages = [m for m in self.messages if m.id < first.id]
        self._emit(MessagesRemoved(first.conversation_id, first.id))

    def _set_busy(self, busy: bool) -> None:
        if busy != self.busy:
            self.busy = busy
            self._emit(BusyChanged(busy))
        if not busy and not self.queued:
            self._emit(ActivityChanged(self.pace.words() or "Idle"))
        self._update_idle()

    def _update_idle(self) -> None:
        if self.busy or self.queued:
            self._idle.clear()
        else:
            self._idle.set()

    # --- window lifecycle and settings ----------------------------------------------------

    def set_window_state(self, window: WindowState) -> None:
        """The window came to the front, went behind another app, or was hidden: the
        engine pauses, runs gently or at full speed as the settings say (background.py)."""
        if self.pace.update(window, when_hidden=self.settings.when_hidden,
                            when_in_background=self.settings.when_in_background):
            self._emit(PaceChanged(self.pace.pace.value, self.pace.words() or ""))
            self._emit(ActivityChanged(self.pace.words() or ("Thinking…" if self.busy else "Idle")))

    async def update_settings(self, settings: Settings) -> None:
        """Save the app's settings (if changed); a new device or thread count reloads the model."""
        before = self.settings
        await self.save_settings(settings)
        self._emit(SettingsChanged(self.settings))
        self.set_window_state(self.pace.window)  # what hidden or background does may have changed
        if before.unload_after_minutes != settings.unload_after_minutes and not self.busy:
            self.idle_timer.restart()  # the new wait counts from now
        if self.model is not None:
            self.client.prompt_lookup = self.model.defaults.prompt_lookup or settings.prompt_lookup
        moved = (before.device_preference, before.threads, before.saved_states_mb) != (
            settings.device_preference, settings.threads, settings.saved_states_mb)
        if moved and self.model is not None and not self.busy:
            await self.load_model(self.model)

    async def hardware_text(self) -> str:
        """The machine as the engine sees it, and where the model runs and why."""
        from app.hardware.summary import format_report

        text = format_report(await self.client.hardware_report())
        loaded = self.client.loaded
        if loaded is not None:
            text += f"\n\nIn use: {loaded.device}\nWhy: {loaded.placement_reason}"
            for reason in loaded.fallback_reasons:
                text += f"\nCould not use {reason}"
            if self.pace.problem:
                text += f"\nPriority: {self.pace.problem}"
            choice = self.threads.last
            if choice is not None:
                text += f"\nCPU threads for the last answer: {choice.threads} ({choice.reason})"
            else:
                text += f"\nCPU threads: {loaded.threads}"
        return text

    async def shutdown(self) -> None:
        """Stop cleanly: end the answer (its text is saved), then the engine and the history."""
        self.setup.cancel()
        self.client.on_died = None
        task = self._answer_task
        if task is not None and not task.done():
            self.client.resume()
            if self._run is not None:
                self._run.cancel()
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                task.cancel()
        await self._cancel_tasks()
        await self.library.close()
        await self.client.shutdown()
        if self.storage is not None:
            await self.storage.close()

    async def _cancel_tasks(self) -> None:
        """End what is still running (a load, a search) before the history closes under it."""
        current = asyncio.current_task()
        pending = [task for task in self._tasks if task is not current and not task.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    # --- plumbing -------------------------------------------------------------------------

    def _storage(self) -> Storage:
        if self.storage is None:
            raise RuntimeError("ChatController.open() was not awaited")
        return self.storage

    async def save_settings(self, settings: Settings) -> None:
        """Keep these settings; a file that cannot be written is said (Problem), not raised."""
        try:
            await self._storage().save_settings(settings)
        except SettingsError as exc:
            self._emit(Problem(str(exc)))
        self.settings = settings

    async def _history_or_problem(self, method: Callable[..., Any], *args: Any) -> Any:
        """One history call; a problem with the user's disk is shown, not raised (None)."""
        try:
            return await self._storage().history(method, *args)
        except HistoryError as exc:
            self._emit(Problem(str(exc)))
            return None


def _damage_text(damage: HistoryDamaged, in_memory: bool) -> str:
    if in_memory:
        found = (f"Your chats could not be opened: the history file {damage.path} is damaged "
                 f"({damage.detail}). Kestrel has not changed it. Until you choose what to do, new chats "
                 "are kept in memory only and are lost when Kestrel closes.")
    else:
        found = (f"Part of your chat history ({damage.path}) is damaged ({damage.detail}): some "
                 "chats may not open or save.")
    return (found + "\n\nRecover what can be read: every chat and message that can still be read goes "
            "into a new history. Start a fresh history: a new, empty one. Either way the damaged "
            "file is kept, unchanged, next to it under a new name.")


def _replaced_text(done: Replacement, recover: bool) -> str:
    if recover:
        text = (f"Recovered {done.conversations} chat(s) and {done.messages} message(s) into a fresh "
                "chat history.")
    else:
        text = "Started a fresh chat history."
    if done.aside is not None:
        text += f" The damaged file was kept, unchanged, as {done.aside}."
    if done.carried:
        text += f" The {len(done.carried)} chat(s) written meanwhile were moved into it."
    return text


def storable(text: str) -> str:
    """The text with anything UTF-8 cannot hold (a lone surrogate, from a command line
    with undecodable bytes or a broken paste) as U+FFFD: SQLite refused it with a
    UnicodeEncodeError and the message was silently lost."""
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _title_from(text: str) -> str:
    first = text.strip().splitlines()[0]
    return first if len(first) <= 48 else first[:47].rstrip() + "…"
