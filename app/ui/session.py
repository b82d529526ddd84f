"""ChatSession: what the window does with the engine, the history and the models."""

from __future__ import annotations

import asyncio
import dataclasses
from enum import Enum

from PySide6.QtCore import QObject, Signal

from app.core.conversation import Message, MessageState, Role
from app.core.generation import GenerationSettings
from app.core.history import HistoryError, HistoryStore
from app.core.settings import Settings, SettingsError, SettingsFile
from app.core.streaming import StreamingMessage
from app.engine.protocol import ChatMessage, Delta, Done, Loaded
from app.library.models import InstalledModel, ModelLibrary
from app.service.client import EngineClient, EngineError
from app.ui.bridge import StreamBridge
from app.ui.conversation_model import ConversationListModel, ConversationRoles
from app.ui.message_model import MessageListModel
from app.ui.model_setup import ModelSetup


class ModelState(str, Enum):
    """Where the model stands, as the status bar shows it."""

    NONE = "none"
    INSTALLING = "installing"
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


class ChatSession(QObject):
    """Sends, streams, stops, regenerates and edits; never blocks the UI thread."""

    modelStateChanged = Signal()
    activityChanged = Signal(str)
    busyChanged = Signal(bool)
    problem = Signal(str)
    conversationOpened = Signal()

    def __init__(self, *, store: HistoryStore, settings_file: SettingsFile, library: ModelLibrary,
                 client: EngineClient, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.settings_file = settings_file
        self.settings: Settings = settings_file.load()
        self.library = library
        self.client = client
        self.conversations = ConversationListModel(store, self)
        self.messages = MessageListModel(self)
        self.bridge = StreamBridge(self)
        self.bridge.textGrew.connect(self.messages.set_text)
        self.setup = ModelSetup(library, self)
        self.conversation_id: int | None = None
        self.model: InstalledModel | None = None
        self.model_state = ModelState.NONE
        self.model_detail = ""
        self.busy = False
        self.queued = False
        self.task: asyncio.Task | None = None
        self._stream: StreamingMessage | None = None
        self._stream_conversation: int | None = None
        self._background = False
        # Set by the app before the session exists; kept so that slots called outside a
        # coroutine (a button, a test) can still start tasks on it.
        self._loop = asyncio.get_event_loop()

    # --- start-up and models --------------------------------------------------------

    async def start_up(self) -> None:
        """After the first paint: recover, list chats, then find and load a model."""
        if self.settings_file.last_problem:
            self.problem.emit(self.settings_file.last_problem)
        try:
            recovered = self.store.recover_interrupted()
        except HistoryError as exc:
            self.problem.emit(str(exc))
            recovered = 0
        self.conversations.reload()
        if self.conversations.rowCount():
            self.open_conversation(self.conversations.index(0).data(ConversationRoles.ID))
        if recovered:
            self.problem.emit(f"{recovered} answer(s) were cut off when Kestrel last closed; "
                              "they are kept and marked as interrupted.")
        model = self.setup.default_model(self.settings.default_model)
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
        self._set_model_state(ModelState.LOADING, f"Loading {model.title}…")
        try:
            await self.client.load(str(model.path), context_length=self._context_length(),
                                   threads=self.settings.threads, device=self.settings.device_preference)
        except EngineError as exc:
            self._set_model_state(ModelState.FAILED, exc.message)
            self.queued = False
            return False
        self._set_model_state(ModelState.READY, model.title)
        self._save_settings(default_model=model.id)
        if self.queued:
            self.queued = False
            self._start_answer()
        return True

    async def import_model(self, path: str) -> None:
        """Check, copy into the library, then load a GGUF file the user picked."""
        model = await self.setup.import_file(path)
        if model is None:
            self.problem.emit(self.setup.last_problem or "The file was not imported.")
            return
        await self.load_model(model)

    @property
    def loaded(self) -> Loaded | None:
        return self.client.loaded

    def _set_model_state(self, state: ModelState, detail: str) -> None:
        self.model_state, self.model_detail = state, detail
        self.modelStateChanged.emit()

    def _context_length(self) -> int:
        if self.conversation_id is not None:
            return self.store.get_conversation(self.conversation_id).settings.context_length
        return self.settings.generation.context_length

    # --- conversations --------------------------------------------------------------

    def new_conversation(self) -> None:
        """An empty chat; it is saved when its first message is sent."""
        self.conversation_id = None
        self.messages.reset_to([])
        self.conversationOpened.emit()

    def open_conversation(self, conversation_id: int) -> None:
        self.conversation_id = conversation_id
        self.messages.reset_to(self.store.messages(conversation_id))
        self.conversationOpened.emit()

    def delete_conversation(self, conversation_id: int) -> bool:
        if self._stream is not None and self._stream_conversation == conversation_id:
            self.problem.emit("Stop the answer before deleting this chat.")
            return False
        self.store.delete_conversation(conversation_id)
        self.conversations.remove(conversation_id)
        if conversation_id == self.conversation_id:
            self.new_conversation()
        return True

    def conversation_settings(self) -> tuple[str, GenerationSettings]:
        if self.conversation_id is None:
            return "", self.settings.generation
        conversation = self.store.get_conversation(self.conversation_id)
        return conversation.system_prompt, conversation.settings

    def set_conversation_settings(self, system_prompt: str, settings: GenerationSettings) -> None:
        conversation_id = self._ensure_conversation("New chat")
        self.store.update_conversation(conversation_id, system_prompt=system_prompt, settings=settings)
        self.conversations.touch(conversation_id)

    def _ensure_conversation(self, title: str) -> int:
        if self.conversation_id is None:
            conversation = self.store.create_conversation(
                title=title, settings=self.settings.generation,
                model=self.model.id if self.model else None)
            self.conversation_id = conversation.id
            self.conversations.touch(conversation.id)
        return self.conversation_id

    # --- sending and answers --------------------------------------------------------

    def send(self, text: str) -> bool:
        """Add the user's message and start the answer (or queue it while a model loads)."""
        if self.busy or not text.strip():
            return False
        try:
            conversation_id = self._ensure_conversation(_title_from(text))
            self.messages.append(self.store.add_message(conversation_id, Role.USER, text))
        except HistoryError as exc:
            self.problem.emit(str(exc))
            return False
        self.conversations.touch(conversation_id)
        self._start_answer()
        return True

    def regenerate(self) -> None:
        """Replace the last answer with a new one."""
        rows = self.messages.rowCount()
        if self.busy or rows == 0 or self.messages.message(rows - 1).role != Role.ASSISTANT:
            return
        last = self.messages.message(rows - 1)
        self.store.delete_messages_from(last.conversation_id, last.id)
        self.messages.remove_from(last.id)
        self._start_answer()

    def edit_and_resend(self, message_id: int, text: str) -> None:
        """Change one of the user's messages; the answers after it are replaced."""
        if self.busy or not text.strip() or self.conversation_id is None:
            return
        self.store.delete_messages_from(self.conversation_id, message_id)
        self.messages.remove_from(message_id)
        self.messages.append(self.store.add_message(self.conversation_id, Role.USER, text))
        self._start_answer()

    def stop(self) -> None:
        """Stop the answer; what was written stays."""
        if self.queued:
            self.queued = False
            self.activityChanged.emit("Idle")
        self.client.cancel()

    def _start_answer(self) -> None:
        if self.model_state != ModelState.READY:
            self.queued = True
            if self.model_state in (ModelState.LOADING, ModelState.INSTALLING):
                self.activityChanged.emit("Your message will be sent when the model is ready…")
            else:
                self.problem.emit("No model is ready: import a model file, or fix the problem shown "
                                  "in the status bar. Your message is kept.")
            return
        # Busy at once: the Send button turns into Stop before the first token.
        self._set_busy(True)
        self.task = self.spawn(self._answer(self.conversation_id))

    def spawn(self, coroutine) -> asyncio.Task:
        """Run a coroutine on the window's event loop."""
        return self._loop.create_task(coroutine)

    async def _answer(self, conversation_id: int) -> None:
        try:
            await self._answer_into(conversation_id)
        except HistoryError as exc:
            # The disk refused (full, read-only): stop the answer, keep it on screen.
            self.client.cancel()
            self._show_unsaved()
            self.problem.emit(f"{exc} The answer so far is on screen but was not saved.")
        finally:
            self._stream = None
            self.conversations.touch(conversation_id)
            self._set_busy(False)

    async def _answer_into(self, conversation_id: int) -> None:
        conversation = self.store.get_conversation(conversation_id)
        history = self.store.messages(conversation_id)
        self._stream = StreamingMessage.start(self.store, conversation_id)
        self._stream_conversation = conversation_id
        if conversation_id == self.conversation_id:
            self.messages.append(self.store.get_message(self._stream.message_id))
        try:
            await self._ensure_context(conversation.settings.context_length)
            await self._run_generation(_chat(conversation.system_prompt, history), conversation.settings)
        except EngineError as exc:  # EngineCrashed too: the next send starts a new engine.
            self._interrupt({"error": exc.message})
            self.problem.emit(exc.message)
            self.modelStateChanged.emit()
        except asyncio.CancelledError:
            self._interrupt(None)
            raise

    def _show_unsaved(self) -> None:
        """Mark the answer on screen as cut off, when the history could not take it."""
        self.bridge.flush()
        stream = self._stream
        if stream is None:
            return
        row = self.messages.row_of(stream.message_id)
        if row is not None:
            shown = self.messages.message(row)
            self.messages.replace(dataclasses.replace(shown, text=stream.text, state=MessageState.INTERRUPTED))

    async def _run_generation(self, chat: list[ChatMessage], settings: GenerationSettings) -> None:
        stream = self._stream
        restarts = self.client.restarts
        self.activityChanged.emit("Thinking…")
        async for event in self.client.generate(chat, settings, trim_history=True):
            if isinstance(event, Delta):
                stream.append(event.text)
                self.bridge.push(stream.message_id, stream.text)
                if self.client.restarts != restarts:
                    restarts = self.client.restarts
                    self.modelStateChanged.emit()
            elif isinstance(event, Done):
                self._finish(stream.finish({**event.stats, "finish_reason": event.finish_reason}))

    async def _ensure_context(self, context_length: int) -> None:
        # Compared with what was asked, not what the engine gave: a model trained on less
        # context is clamped, and must not be reloaded before every answer.
        asked = self.client.load_request
        if asked is not None and self.model is not None and asked.context_length != context_length:
            self.activityChanged.emit("Reloading the model with the new context length…")
            await self.client.load(str(self.model.path), context_length=context_length,
                                   threads=self.settings.threads, device=self.settings.device_preference)
            self.modelStateChanged.emit()

    def _interrupt(self, stats: dict | None) -> None:
        if self._stream is not None and not self._stream.done:
            self._finish(self._stream.interrupt(stats))

    def _finish(self, message: Message) -> None:
        self.bridge.flush()
        self.messages.replace(message)

    def _set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.busyChanged.emit(busy)
        if not busy:
            self.activityChanged.emit("Paused (window in the background)" if self._background else "Idle")

    # --- window lifecycle -----------------------------------------------------------

    def set_background(self, background: bool) -> None:
        """Minimized or hidden: hold the engine between two tokens; back: go on."""
        if background == self._background:
            return
        self._background = background
        if background:
            self.client.pause()
            self.activityChanged.emit("Paused (window in the background)")
        else:
            self.client.resume()
            self.activityChanged.emit("Thinking…" if self.busy else "Idle")

    async def shutdown(self) -> None:
        """Stop cleanly: end the answer (its text is saved), then the engine."""
        self.setup.cancel()
        if self.task is not None and not self.task.done():
            self.client.resume()
            self.client.cancel()
            try:
                await asyncio.wait_for(asyncio.shield(self.task), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self.task.cancel()
        self._interrupt(None)
        self._stream = None
        await self.client.shutdown()

    def update_settings(self, settings: Settings) -> None:
        """Save the app's settings; a new device or thread count reloads the model."""
        before = self.settings
        self.settings = settings
        self._save_settings()
        moved = (before.device_preference, before.threads) != (settings.device_preference, settings.threads)
        if moved and self.model is not None and not self.busy:
            self.spawn(self.load_model(self.model))

    async def hardware_text(self) -> str:
        """The machine as the engine sees it, and where the model runs and why."""
        from app.hardware.summary import format_report

        text = format_report(await self.client.hardware_report())
        loaded = self.client.loaded
        if loaded is not None:
            text += f"\n\nIn use: {loaded.device}\nWhy: {loaded.placement_reason}"
            for reason in loaded.fallback_reasons:
                text += f"\nCould not use {reason}"
        return text

    def _save_settings(self, **changes) -> None:
        if changes:
            self.settings = dataclasses.replace(self.settings, **changes)
        try:
            self.settings_file.save(self.settings)
        except SettingsError as exc:
            self.problem.emit(str(exc))


def _title_from(text: str) -> str:
    first = text.strip().splitlines()[0]
    return first if len(first) <= 48 else first[:47].rstrip() + "…"


def _chat(system_prompt: str, history: list[Message]) -> list[ChatMessage]:
    chat = [ChatMessage("system", system_prompt)] if system_prompt.strip() else []
    for message in history:
        if message.role != Role.SYSTEM and message.text and message.state != MessageState.STREAMING:
            chat.append(ChatMessage(message.role.value, message.text))
    return chat
