"""ChatController: the service's owners wired together, and the API every front end calls."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.core.attachments import AttachedFile, AttachedImage
from app.core.conversation import Conversation, Message
from app.core.generation import GenerationSettings
from app.core.history import HistoryDamaged, HistoryError
from app.core.settings import Settings
from app.engine.protocol import Loaded
from app.hardware.power import read_power
from app.library.installed import InstalledModel
from app.library.models import ModelLibrary
from app.service.chats.answering import Answering, storable
from app.service.api.api_answers import ApiAnswers
from app.service.models.background import WindowState
from app.service.documents.attached_files import read_in_worker_off_loop
from app.service.documents.attached_images import read_image_data, read_images
from app.service.chats.chat_collections import ChatCollections, collection_search
from app.service.chats.chat_files import ChatFiles, ExportOutcome
from app.service.models.engine_handle import EngineHandle
from app.service.models.engine_errors import EngineError
from app.service.chats.conversations import Conversations
from app.service.documents.document_context import ChatDocuments
from app.service.documents.documents_service import DocumentsService
from app.service.chats.drafts import DraftBook
from app.service.event_bus import EventBus, Listener, TaskGroup
from app.service.events import (ActivityChanged, ConversationModelChosen, ConversationsListed, DamagedHistoryFound,
                                ModelState, Problem, SettingsChanged)
from app.service.chats.history_choice import HistoryChoice, damage_text
from app.service.chats.history_follow import HistoryFollower
from app.service.library.library_service import LibraryService
from app.service.models.model_session import ModelSession
from app.service.models.model_setup import ModelSetup
from app.service.chats.open_chat import OpenChat
from app.service.settings_keeper import SettingsKeeper
from app.service.tools.tool_use import ToolUse
from app.service.storage import Storage
from app.service.chats.vision import VisionState, chat_vision

if TYPE_CHECKING:
    from app.service.library.downloads import DownloadQueue


class ChatController:
    """Builds the owners and gives front ends (the window, the CLI) one API over them.

    The owners: `bus` and `tasks` (events and running work), `keeper` (settings),
    `session` (the model and the engine), `conversations` (every saved chat), `chat`
    (the one on screen), `answers` (sending and the answer line), `tools` (MCP servers,
    approvals, running calls), `documents` (the files and collections a chat answers
    from; `collection_choice`: which collections), `api` (the API
    server's answers, beside the chats on the same engine line), `library` (the model
    manager), `files`, `history_choice`, `elsewhere` (what other processes change in the
    history). Each gets the collaborators it needs; none
    knows this class, so the API server and tools can use `session` and `conversations`
    without the window's open chat. Front ends hear back through `subscribe`.
    """

    def __init__(self, *, history_path: Path, settings_path: Path | None, library: ModelLibrary,
                 client: EngineHandle, settings: Settings | None = None, mcp_file: Path | None = None) -> None:
        self._history_path, self._settings_path = history_path, settings_path
        self.storage: Storage | None = None
        self.bus = EventBus()
        self.tasks = TaskGroup(asyncio.get_event_loop())
        emit = self.bus.emit
        self.keeper = SettingsKeeper(self._storage, emit, settings)
        self.session = ModelSession(
            client, ModelSetup(library, emit), self.bus, self.tasks, self.keeper,
            context_length=lambda: self.chat.context_length(), answers_busy=self._answers_busy,
            answer_writing=lambda: self.answers.writing,
            threads_file=settings_path.parent / "threads.json" if settings_path else None)
        drafts = DraftBook(lambda: self.storage, emit, self.tasks.spawn)
        self.conversations = Conversations(self._storage, emit, self.keeper, drafts,
                                           lambda: self.session.chat_defaults_model)
        self.chat = OpenChat(self.conversations, self.bus)
        # mcp.json sits beside settings.json (app.core.paths); a CLI chat with no settings file names it.
        self.tools = ToolUse(mcp_file or (settings_path.with_name("mcp.json") if settings_path else None),
                             self.keeper, emit)
        self.documents = ChatDocuments(lambda: loaded.context_length if (loaded := self.session.loaded) else None,
                                       count=lambda text: self.session.client.count_tokens(text))
        self.collection_choice = ChatCollections(self._storage, self.chat, self.conversations, self.bus)
        self.sight = chat_vision(self.chat, self.session, lambda: (row.model for row in self.library.rows))
        self.answers = Answering(storage=self._storage, emit=emit, tasks=self.tasks, chat=self.chat,
                                 conversations=self.conversations, session=self.session, keeper=self.keeper,
                                 tools=self.tools, documents=self.documents, vision=self.vision)
        self.api = ApiAnswers(self.session, self.keeper, self.conversations, emit, spawn=self.tasks.spawn,
                              chats_busy=lambda: not self.answers.queue.idle)
        self.library = LibraryService(self.session, self.keeper, emit, self.tasks, answers_busy=self._answers_busy)
        self.files = ChatFiles(self._storage, emit)
        self.history_choice = HistoryChoice(self._storage, emit, self.conversations,
                                            answers_busy=lambda: not self.answers.queue.idle,
                                            open_id=lambda: self.chat.id, show_new=self.new_conversation,
                                            show=self.open_conversation)
        self.drafts = drafts
        self.elsewhere = HistoryFollower(self._storage, self.bus, self.tasks.loop, self.conversations, self.chat,
                                         busy=lambda: self.answers.open_chat_busy, show_new=self.new_conversation,
                                         show=self.open_conversation)
        # The window's collections, indexed in the background; it holds while an answer streams.
        self.collections = DocumentsService(emit, library=library, settings=lambda: self.keeper.settings,
                                            save_settings=self.keeper.save, read_power=read_power)
        self.bus.subscribe(self.collections.hear)
        self.documents.use_search(collection_search(self.collections))
        # The window's documents API: files read in the reader's worker, images checked in the image check's,
        # off the loop (AttachmentsUnreadable, ImagesUnreadable name each one refused); the open chat's
        # collections (a new chat keeps them until its first message).
        self.read_attachments, self.read_images, self.read_image_data = (read_in_worker_off_loop, read_images,
                                                                         read_image_data)
        self.chat_collections, self.set_chat_collections = self.collection_choice.names, self.collection_choice.choose
        self.subscribe: Callable[[Listener], Callable[[], None]] = self.bus.subscribe
        self.spawn = self.tasks.spawn

    def _answers_busy(self) -> bool:
        """A chat's or an API request's answer is written or waits: nothing reloads or unloads."""
        return not self.answers.queue.idle or self.api.busy

    def _storage(self) -> Storage:
        if self.storage is None:
            raise RuntimeError("ChatController.open() was not awaited")
        return self.storage

    # --- what front ends read ------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self.keeper.settings

    @property
    def conversation(self) -> Conversation | None:
        """The open chat (None: a new chat, saved on its first message)."""
        return self.chat.conversation

    @property
    def messages(self) -> list[Message]:
        return self.chat.messages

    @property
    def model(self) -> InstalledModel | None:
        """The model loaded, or being loaded."""
        return self.session.model

    @property
    def model_state(self) -> ModelState:
        return self.session.state

    @property
    def model_detail(self) -> str:
        return self.session.detail

    @property
    def load_error(self) -> EngineError | None:
        return self.session.load_error

    @property
    def loaded(self) -> Loaded | None:
        """Where the engine runs the model now (None while none is loaded)."""
        return self.session.loaded

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

    @property
    def downloads(self) -> DownloadQueue | None:
        """The window's download queue (None until open(), and in the CLI's chat)."""
        return self.library.downloads

    @property
    def history_damage(self) -> HistoryDamaged | None:
        """The damage found in the history file, until the user chose what to do."""
        return self.storage.history_damage if self.storage is not None else None

    # --- start-up -------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the history and read the settings (off the event loop).

        A damaged history file is left as it is, reported (DamagedHistoryFound) and
        replaced by one in memory until the user chooses (recover_history or
        start_fresh_history); everything else goes on. HistoryError if the history
        cannot be used for another reason; the message is for the user.
        """
        # A large history from an older Kestrel is migrated here (an index is built):
        # seconds, on the writer thread, with the window already up.
        self.bus.emit(ActivityChanged("Opening your chats…"))
        self.storage = storage = await Storage.open(self._history_path, self._settings_path)
        storage.on_damaged = self._history_damaged
        self.bus.emit(ActivityChanged("Idle"))
        self.keeper.adopt(storage)
        self.bus.emit(SettingsChanged(self.settings))
        if storage.settings_problem:
            self.bus.emit(Problem(storage.settings_problem, "disk"))
        if storage.history_damage is not None:
            self._history_damaged(storage.history_damage)
        await self.drafts.load()
        await storage.run(self.session.threads.load)
        if self._settings_path is not None and self.library.downloads is None:
            await self.library.open_downloads(self._settings_path.parent / "downloads.json")

    def _history_damaged(self, damage: HistoryDamaged) -> None:
        in_memory = self.storage is not None and self.storage.in_memory
        self.bus.emit(DamagedHistoryFound(damage_text(damage, in_memory), damage.path, in_memory))

    async def start_up(self) -> None:
        """The window's start: open, recover, list chats, then find and load a model."""
        await self.open()
        recovered = await self.conversations.recover_interrupted()
        await self.elsewhere.watch()
        conversations = await self.conversations.listing()
        self.bus.emit(ConversationsListed(tuple(conversations)))
        if conversations:
            await self.open_conversation(conversations[0].id)
        else:
            self.new_conversation()
        await self.collections.start()  # after the chat is shown: its imports take a moment
        if recovered:
            self.bus.emit(Problem(f"{recovered} answer(s) were cut off when Kestrel last closed; "
                                  "they are kept and marked as interrupted.", "history"))
        await self.session.load_default(self.settings.default_model)

    async def load_model(self, model: InstalledModel) -> bool:
        """Load a model as the app's; the state says loading, ready or failed and why."""
        return await self.session.load_model(model)

    async def follow_history(self) -> None:
        """Another Kestrel process changed the history (HistoryChangedElsewhere): read it again."""
        await self.elsewhere.follow()

    async def recover_history(self) -> bool:
        """The user's choice for a damaged history: what SQLite can still read of it goes
        into a fresh one; the damaged file is kept, unchanged, under a new name."""
        return await self.history_choice.replace(recover=True)

    async def start_fresh_history(self) -> bool:
        """The user's choice for a damaged history: a new, empty one (with the chats
        written meanwhile); the damaged file is kept, unchanged, under a new name."""
        return await self.history_choice.replace(recover=False)

    # --- the open chat --------------------------------------------------------------------

    def new_conversation(self) -> None:
        """An empty chat; it is saved when its first message is sent."""
        self.chat.show_new()
        self.answers.busy_maybe_changed(always=True)

    async def open_conversation(self, conversation_id: int) -> None:
        """Show a saved chat (read on the writer thread); nothing is loaded for it."""
        if await self.chat.show(conversation_id, self.answers.live_answer):
            self.answers.busy_maybe_changed(always=True)

    async def delete_conversation(self, conversation_id: int) -> bool:
        """Delete a chat and its messages: a waiting answer leaves the line, one being
        written is stopped (and saved) first."""
        await self.answers.leave(conversation_id)
        if not await self.conversations.delete(conversation_id):
            return False
        if self.chat.id == conversation_id:
            self.new_conversation()
        return True

    async def rename_conversation(self, conversation_id: int, title: str) -> bool:
        """Give a chat a new title; its place in the list stays."""
        return await self.conversations.rename(conversation_id, title)

    async def search(self, query: str) -> set[int] | None:
        """The ids of the chats whose title or messages contain query (None: no filter)."""
        return await self.conversations.search(query)

    async def export_conversation(self, conversation_id: int, path: Path, fmt: str, replace: bool = False) -> bool:
        """Write a chat to path as "markdown" or "json" (over a file there only with replace);
        a Problem naming the file if not."""
        return await self.files.export(conversation_id, path, fmt, replace=replace) is ExportOutcome.WRITTEN

    async def import_conversation(self, path: Path) -> int | None:
        """Add a JSON export as a new chat (listed by ConversationChanged); its id, or None."""
        return await self.files.import_(path)

    def conversation_settings(self) -> tuple[str, GenerationSettings]:
        """The open chat's system prompt and generation settings (the defaults for a new one)."""
        return self.chat.settings()

    async def set_conversation_settings(self, system_prompt: str, settings: GenerationSettings) -> bool:
        """Change the open chat's system prompt and settings (saving a new chat first)."""
        try:
            await self.conversations.update(await self.chat.ensure_saved(), system_prompt, settings)
        except HistoryError as exc:
            self.bus.emit(Problem(str(exc), "history"))
            return False
        return True

    def conversation_model_id(self) -> str | None:
        """The open chat's own model (None: the default model); a new chat's choice too."""
        return self.chat.model_id()

    async def set_conversation_model(self, model_id: str | None) -> None:
        """Choose the open chat's model (None: the default); loaded when it is next sent to."""
        conversation_id = self.chat.id
        if conversation_id is None:
            self.chat.new_chat_model = model_id
        elif not await self.conversations.choose_model(conversation_id, model_id):
            return
        self.bus.emit(ConversationModelChosen(conversation_id, model_id))

    def draft_for(self, conversation_id: int | None) -> str:
        """The chat's unsent text (None: the new chat's)."""
        return self.drafts.text(conversation_id)

    def save_draft(self, conversation_id: int | None, text: str) -> None:
        """Keep the chat's unsent text; returns at once (written on the writer thread)."""
        self.drafts.put(conversation_id, storable(text))

    def send(self, text: str, attachments: Sequence[AttachedFile] = (), images: Sequence[AttachedImage] = ()) -> bool:
        """Save the user's message (and files, images: alone, they ask for a summary, a description) in the
        open chat; its answer follows in turn (answering.py). Images a model cannot see: False, a Problem says why."""
        return self.answers.send(text, attachments, history_open=self.storage is not None,
                                 collections=self.collection_choice.take_pending, images=images)

    def vision(self) -> VisionState:
        """Whether the open chat's model takes images, and why not (ask again on ModelStateChanged,
        ConversationOpened, ConversationModelChosen)."""
        return self.sight.state()

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

    # --- the window and settings ---------------------------------------------------------

    def set_window_state(self, window: WindowState) -> None:
        """The window came to the front, went behind another app, or was hidden: the
        engine pauses, runs gently or at full speed as the settings say (background.py)."""
        if window == WindowState.FOREGROUND:
            self.collections.window_shown()  # files may have changed meanwhile: a rescan
        if self.session.set_window_state(window):
            answering = self.answers.queue.answering_id
            self.bus.emit(ActivityChanged(self.session.pace.words() or (self.answers.activity_words()
                                                                         if answering is not None else "Idle"),
                                          answering))

    async def update_settings(self, settings: Settings) -> None:
        """Save the app's settings (if changed); a new device or thread count reloads the model."""
        before = self.settings
        await self.keeper.save(settings)
        self.bus.emit(SettingsChanged(self.settings))
        self.set_window_state(self.session.pace.window)  # what hidden or background does may have changed
        await self.session.settings_changed(before, settings)

    async def clear_saved_states(self) -> None:
        """The settings' "clear saved chat states": the engine's RAM copies, then the files."""
        await self.session.clear_saved_states()

    async def shutdown(self) -> None:
        """Stop cleanly: end the answer (its text is saved), then the engine and the history."""
        self.session.stop_for_shutdown()
        task = self.answers.queue.close()
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                task.cancel()
        await self.drafts.flush()
        await self.tools.close()  # no MCP server outlives Kestrel
        await self.tasks.cancel_all()
        await self.library.close()
        await self.collections.close()
        await self.session.client.shutdown()
        if self.storage is not None:
            await self.storage.close()
