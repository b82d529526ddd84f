"""ChatController: what every front end does with chats, models and the engine, in plain asyncio."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.conversation import UNTITLED, Conversation, Message
from app.core.generation import GenerationSettings
from app.core.history import HistoryDamaged, HistoryError, HistoryStore
from app.core.settings import Settings, SettingsError
from app.engine.protocol import Loaded
from app.engine.resources import default_threads
from app.library.models import InstalledModel, ModelLibrary
from app.hardware.power import read_power
from app.service import kv_cache
from app.service.answering import Answering, same_model, storable
from app.service.chat_files import ChatFiles
from app.service.drafts import DraftBook
from app.service.history_choice import HistoryChoice, damage_text
from app.service.background import EnginePace, WindowState
from app.service.idle import UNLOADED_WORDS, IdleTimer
from app.service.threads import BusyMeter, ThreadAdvisor
from app.service.client import EngineClient, EngineDied, EngineError
from app.service.engine_queue import EngineQueue
from app.service.events import (ActivityChanged, ConversationChanged,
                                ConversationModelChosen, ConversationOpened, ConversationRemoved,
                                ConversationsListed, DamagedHistoryFound, Event, MessageAdded, MessagesRemoved,
                                ModelState, ModelStateChanged, PaceChanged, Problem, ProblemSolved,
                                SettingsChanged)
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
    for a new chat), `messages` (its messages), `model` (loaded, or being loaded),
    `model_state`, `model_detail`, `answering_id` (the chat being answered: its answer is
    written, or its model loads first), `waiting_ids` (chats whose answers wait their
    turn, in order), `open_chat_busy` (the open chat is one of those).
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
        # The model loaded for chats on the default model (the app's choice), which a
        # chat's own model replaces in the engine only while that chat is answered.
        self.app_model: InstalledModel | None = None
        self.model_state = ModelState.NONE
        self.model_detail = ""
        self.load_error: EngineError | None = None
        self._listeners: list[Listener] = []
        self._tasks: set[asyncio.Task] = set()
        self.answers = Answering(self)
        self.drafts = DraftBook(lambda: self.storage, self._emit, self.spawn)
        self.files = ChatFiles(self._storage, self._emit)
        self.history_choice = HistoryChoice(self)
        self.opened = 0  # counts chats opened, so a late save knows whether its chat is still shown
        self._new_chat_model: str | None = None
        self._engine_trouble = False  # an engine failure was said; a new engine answering ends it
        self._model_moved: asyncio.Future | None = None
        self.pace = EnginePace(self.client, read_power, set_gentle)
        self.idle_timer = IdleTimer(lambda: self.settings.unload_after_minutes, self._unload_idle_model, self.spawn)
        self.busy_meter = BusyMeter(lambda: [os.getpid(), *([self.client.pid] if self.client.pid else [])])
        self.threads = ThreadAdvisor(settings_path.parent / "threads.json" if settings_path else None,
                                     cores=default_threads(), busy=self.busy_meter.look)
        # The loop the front end runs; slots called outside a coroutine (a button) start
        # tasks on it.
        self._loop = asyncio.get_event_loop()
        client.on_died = self._engine_died

    # --- events -------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call listener with every event from now on; returns what unsubscribes it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:  # twice is harmless (the adapter's close(), then its destruction)
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _emit(self, event: Event) -> None:
        if isinstance(event, Problem) and event.kind == "engine":
            self._engine_trouble = True
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
            self._emit(Problem(self.storage.settings_problem, "disk"))
        if self.storage.history_damage is not None:
            self._history_damaged(self.storage.history_damage)
        await self.drafts.load()
        await self.storage.run(self.threads.load)
        if self._settings_path is not None and self.library.downloads is None:
            await self.library.open_downloads(self._settings_path.parent / "downloads.json")

    @property
    def history_damage(self) -> HistoryDamaged | None:
        """The damage found in the history file, until the user chose what to do."""
        return self.storage.history_damage if self.storage is not None else None

    def _history_damaged(self, damage: HistoryDamaged) -> None:
        in_memory = self.storage is not None and self.storage.in_memory
        self._emit(DamagedHistoryFound(damage_text(damage, in_memory), damage.path, in_memory))

    async def recover_history(self) -> bool:
        """The user's choice for a damaged history: what SQLite can still read of it goes
        into a fresh one; the damaged file is kept, unchanged, under a new name."""
        return await self.history_choice.replace(recover=True)

    async def start_fresh_history(self) -> bool:
        """The user's choice for a damaged history: a new, empty one (with the chats
        written meanwhile); the damaged file is kept, unchanged, under a new name."""
        return await self.history_choice.replace(recover=False)

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
                               "they are kept and marked as interrupted.", "history"))
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
            return False
        self.pace.loaded()
        self.busy_meter.look()
        self._set_model_state(ModelState.READY, model.title)
        if self._engine_trouble:
            self._engine_trouble = False
            self._emit(ProblemSolved("engine"))
        self.idle_timer.restart()
        if not for_chat:
            await self.save_settings(dataclasses.replace(self.settings, default_model=model.id))
        return True

    async def import_model(self, path: str) -> bool:
        """Check and copy a model the user picked into the library, then load it."""
        model = await self.setup.import_model(path)
        if model is None:
            self._emit(Problem(self.setup.last_problem or "The model was not imported.", "model"))
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
        if self.app_model is not None and self.model is not None and self.app_model.id == self.model.id:
            self.app_model = None
        self.model = None
        self._set_model_state(ModelState.NONE, "No model loaded. Choose one in the model manager.")

    @property
    def loaded(self) -> Loaded | None:
        """Where the engine runs the model now (None while none is loaded)."""
        return self.client.loaded

    def _set_model_state(self, state: ModelState, detail: str) -> None:
        self.model_state, self.model_detail = state, detail
        self._emit(ModelStateChanged(state, detail, self.client.loaded if state == ModelState.READY else None))
        moved, self._model_moved = self._model_moved, None
        if moved is not None and not moved.done():
            moved.set_result(None)

    async def model_moves(self) -> None:
        """Until the model's state next changes."""
        if self._model_moved is None:
            self._model_moved = self._loop.create_future()
        await asyncio.shield(self._model_moved)

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
        model = self.app_model or self.model
        own = model.defaults.system_prompt if model is not None else None
        return own or ""

    def _new_chat_settings(self) -> GenerationSettings:
        """A new chat's settings: the app model's own defaults over the app's."""
        model = self.app_model or self.model
        if model is None:
            return self.settings.generation
        return model.defaults.generation(self.settings.generation)

    def _engine_died(self, died: EngineDied) -> None:
        """The engine ended by itself, or was ended as hung: say so now, not on the next
        send. One that ignored Stop is started again at once."""
        self._engine_trouble = True
        if died.restart and self.model is not None:
            run = self.answers.queue.run
            if run is None or not run.running:  # an answer it cut off says so itself
                self._emit(Problem(died.message, "engine"))
            self.spawn(self.load_model(self.model, for_chat=not same_model(self.model, self.app_model)))
            return
        self._set_model_state(ModelState.FAILED, died.message)

    # --- conversations --------------------------------------------------------------------

    def new_conversation(self) -> None:
        """An empty chat; it is saved when its first message is sent."""
        self.conversation = None
        self.messages = []
        self._new_chat_model = None
        self.opened += 1
        self._emit(ConversationOpened(None, ()))
        self.answers.busy_maybe_changed(always=True)

    async def open_conversation(self, conversation_id: int) -> None:
        """Show a saved chat (read on the writer thread); nothing is loaded for it."""
        storage = self._storage()
        try:
            conversation = await storage.history(HistoryStore.get_conversation, conversation_id)
            messages = await storage.history(HistoryStore.messages, conversation_id)
        except (HistoryError, KeyError) as exc:
            self._emit(Problem(str(exc) if isinstance(exc, HistoryError) else "That chat is no longer there.",
                               "history"))
            return
        run = self.answers.queue.run
        stream = run.stream if run is not None else None
        if stream is not None and stream.message.conversation_id == conversation_id:
            # The history holds the answer as of its last save; show all that arrived.
            messages = [dataclasses.replace(m, text=stream.text, thinking=stream.thinking)
                        if m.id == stream.message_id else m for m in messages]
        self.conversation, self.messages = conversation, messages
        self.opened += 1
        self._emit(ConversationOpened(conversation, tuple(messages)))
        self.answers.busy_maybe_changed(always=True)

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
            self._emit(Problem(str(exc), "history"))
            return False
        if self.conversation is not None and self.conversation.id == conversation_id:
            self.conversation = conversation
        self._emit(ConversationChanged(conversation, to_top=False))
        return True

    async def delete_conversation(self, conversation_id: int) -> bool:
        """Delete a chat and its messages: a waiting answer leaves the line, one being
        written is stopped (and saved) first."""
        turn = self.answers.queue.turn_of(conversation_id)
        if turn is not None:
            self.answers.queue.drop(turn)
            await turn.ended.wait()
        try:
            await self._storage().history(HistoryStore.delete_conversation, conversation_id)
        except KeyError:
            pass  # deleted already (a second click): gone is what was asked
        except HistoryError as exc:
            self._emit(Problem(str(exc), "history"))
            return False
        self.drafts.forget(conversation_id)
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
            conversation_id = await self._ensure_conversation(UNTITLED)
            storage = self._storage()
            await storage.history(HistoryStore.update_conversation, conversation_id,
                                  system_prompt=system_prompt, settings=settings)
            await self.refresh_conversation(conversation_id)
        except HistoryError as exc:
            self._emit(Problem(str(exc), "history"))
            return False
        return True

    def conversation_model_id(self) -> str | None:
        """The open chat's own model (None: the default model); a new chat's choice too."""
        return self.conversation.model if self.conversation is not None else self._new_chat_model

    async def set_conversation_model(self, model_id: str | None) -> None:
        """Choose the open chat's model (None: the default); loaded when it is next sent to."""
        if self.conversation is None:
            self._new_chat_model = model_id
            self._emit(ConversationModelChosen(None, model_id))
            return
        conversation_id = self.conversation.id
        try:
            await self._storage().history(HistoryStore.choose_model, conversation_id, model_id)
            conversation = await self._storage().history(HistoryStore.get_conversation, conversation_id)
        except (HistoryError, KeyError) as exc:
            self._emit(Problem(str(exc) if isinstance(exc, HistoryError) else "That chat is gone.", "history"))
            return
        if self.conversation is not None and self.conversation.id == conversation_id:
            self.conversation = conversation
        self._emit(ConversationChanged(conversation, to_top=False))
        self._emit(ConversationModelChosen(conversation_id, model_id))

    async def search(self, query: str) -> set[int] | None:
        """The ids of the chats whose title or messages contain query (None: no filter)."""
        query = query.strip()
        if not query:
            return None
        found = await self._history_or_problem(HistoryStore.search_conversations, query)
        return {c.id for c in found} if found is not None else None

    # --- drafts and files -----------------------------------------------------------------

    def draft_for(self, conversation_id: int | None) -> str:
        """The chat's unsent text (None: the new chat's)."""
        return self.drafts.text(conversation_id)

    def save_draft(self, conversation_id: int | None, text: str) -> None:
        """Keep the chat's unsent text; returns at once (written on the writer thread)."""
        self.drafts.put(conversation_id, storable(text))

    async def export_conversation(self, conversation_id: int, path: Path, fmt: str) -> bool:
        """Write a chat to path as "markdown" or "json"; a Problem naming the file if not."""
        return await self.files.export(conversation_id, path, fmt)

    async def import_conversation(self, path: Path) -> int | None:
        """Add a JSON export as a new chat (listed by ConversationChanged); its id, or None."""
        return await self.files.import_(path)

    async def _ensure_conversation(self, title: str) -> int:
        if self.conversation is None:
            self.conversation = await self.create_conversation(title)
        return self.conversation.id

    async def create_conversation(self, title: str, model_id: str | None = None) -> Conversation:
        """Save a new chat (model_id: its own model, None for the new chat's choice)."""
        storage = self._storage()
        conversation = await storage.history(
            HistoryStore.create_conversation, title=title, system_prompt=self._new_chat_system_prompt(),
            settings=self._new_chat_settings(), model=model_id or self._new_chat_model)
        self._emit(ConversationChanged(conversation))
        return conversation

    async def refresh_conversation(self, conversation_id: int) -> Conversation:
        conversation = await self._storage().history(HistoryStore.get_conversation, conversation_id)
        if self.conversation is not None and self.conversation.id == conversation_id:
            self.conversation = conversation
        self._emit(ConversationChanged(conversation))
        return conversation

    # --- sending and answers (answering.py) ------------------------------------------------

    @property
    def answering_id(self) -> int | None:
        """The chat being answered: its answer is being written, or its model loads first."""
        return self.answers.queue.answering_id

    @property
    def waiting_ids(self) -> tuple[int, ...]:
        """The chats whose answers wait for it, in the order they will be answered."""
        return self.answers.queue.waiting_ids

    @property
    def open_chat_busy(self) -> bool:
        """The open chat is being answered or waits its turn (its Send is a Stop)."""
        return self.answers.open_chat_busy

    def send(self, text: str) -> bool:
        """Save the user's message in the open chat; its answer follows in turn (answering.py)."""
        return self.answers.send(text)

    def regenerate(self) -> bool:
        """Replace the open chat's last answer (or answer its unanswered last message)."""
        return self.answers.regenerate()

    def edit_and_resend(self, message_id: int, text: str) -> bool:
        """Change one of the user's messages; the answers after it are replaced."""
        return self.answers.edit_and_resend(message_id, text)

    def stop(self, conversation_id: int | None = None) -> None:
        """Stop a chat's answer (what was written stays), or take it out of the line (its
        message stays, unanswered). None: the open chat's."""
        self.answers.stop(conversation_id)

    async def wait_idle(self) -> None:
        """Until no answer is being written and none waits."""
        await self.answers.queue.wait_idle()

    async def _unload_idle_model(self) -> None:
        """No answer for a while: give the model's memory back (and the engine's, if chosen)."""
        if not self.answers.queue.idle or self.model_state != ModelState.READY:
            return
        async with self.engine.exclusive():
            if not self.answers.queue.idle or self.model_state != ModelState.READY:
                return  # a message came while this waited for the engine
            # Said first: a message sent while the model unloads waits for it to load again
            # (load_model waits for this exclusive hold to end).
            self._set_model_state(ModelState.UNLOADED, UNLOADED_WORDS)
            if self.settings.exit_engine_when_idle:
                await self.client.shutdown()
            else:
                await self.client.unload()

    async def ensure_context(self, context_length: int) -> None:
        # Compared with what was asked, not what the engine gave: a model trained on less
        # context is clamped, and must not be reloaded before every answer.
        asked = self.client.load_request
        if asked is not None and self.model is not None and asked.context_length != context_length:
            self._emit(ActivityChanged("Reloading the model with the new context length…"))
            async with self.engine.exclusive():
                await self._load(self.model, context_length)
            self._set_model_state(ModelState.READY, self.model_detail)

    def add_to_open(self, message: Message) -> None:
        """Show a message in the open chat (once: reopening the chat may have read it already)."""
        if (self.conversation is not None and message.conversation_id == self.conversation.id
                and all(shown.id != message.id for shown in self.messages[-4:])):
            self.messages.append(message)
            self._emit(MessageAdded(message))

    def replace_in_open(self, message: Message) -> None:
        for row, shown in enumerate(self.messages):
            if shown.id == message.id:
                self.messages[row] = message

    def remove_from(self, first: Message) -> None:
        if self.conversation is not None and first.conversation_id == self.conversation.id:
            self.messages = [m for m in self.messages if m.id < first.id]
        self._emit(MessagesRemoved(first.conversation_id, first.id))

    # --- window lifecycle and settings ----------------------------------------------------

    def set_window_state(self, window: WindowState) -> None:
        """The window came to the front, went behind another app, or was hidden: the
        engine pauses, runs gently or at full speed as the settings say (background.py)."""
        if self.pace.update(window, when_hidden=self.settings.when_hidden,
                            when_in_background=self.settings.when_in_background):
            self._emit(PaceChanged(self.pace.pace.value, self.pace.words() or ""))
            answering = self.answers.queue.answering_id
            self._emit(ActivityChanged(self.pace.words() or ("Thinking…" if answering is not None else "Idle"),
                                       answering))

    async def update_settings(self, settings: Settings) -> None:
        """Save the app's settings (if changed); a new device or thread count reloads the model."""
        before = self.settings
        await self.save_settings(settings)
        self._emit(SettingsChanged(self.settings))
        self.set_window_state(self.pace.window)  # what hidden or background does may have changed
        if before.unload_after_minutes != settings.unload_after_minutes and self.answers.queue.idle:
            self.idle_timer.restart()  # the new wait counts from now
        if self.model is not None:
            self.client.prompt_lookup = self.model.defaults.prompt_lookup or settings.prompt_lookup
        moved = (before.device_preference, before.threads, before.saved_states_mb) != (
            settings.device_preference, settings.threads, settings.saved_states_mb)
        if moved and self.model is not None and self.answers.queue.idle:
            # Loaded again as it was loaded: a chat's own model stays that chat's.
            await self.load_model(self.model, for_chat=not same_model(self.model, self.app_model))

    async def shutdown(self) -> None:
        """Stop cleanly: end the answer (its text is saved), then the engine and the history."""
        self.setup.cancel()
        self.client.on_died = None
        self.client.resume()
        task = self.answers.queue.close()
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                task.cancel()
        await self.drafts.flush()
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
            self._emit(Problem(str(exc), "disk"))
        self.settings = settings

    async def _history_or_problem(self, method: Callable[..., Any], *args: Any) -> Any:
        """One history call; a problem with the user's disk is shown, not raised (None)."""
        try:
            return await self._storage().history(method, *args)
        except HistoryError as exc:
            self._emit(Problem(str(exc), "history"))
            return None
