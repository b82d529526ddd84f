"""The composition root: every owner built once, in the order they stand on each other, started and stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from app.core.store.history import HistoryDamaged, HistoryError
from app.core.settings import Settings
from app.hardware.power import read_power
from app.core.paths import data_paths
from app.library.models import ModelLibrary
from app.library.servers.book import ServerBook
from app.service.api.api_answers import ApiAnswers
from app.service.api.api_embeddings import ApiEmbeddings
from app.service.api.api_voice import ApiVoice
from app.service.chats.answering import Answering
from app.service.chats.chat_collections import ChatCollections, collection_search
from app.service.chats.chat_files import ChatFiles
from app.service.chats.conversations import Conversations
from app.service.chats.drafts import DraftBook
from app.service.chats.history_choice import HistoryChoice, damage_text
from app.service.chats.history_follow import HistoryFollower
from app.service.chats.memory.memory_book import MemoryBook
from app.service.chats.memory.memory_proposals import MemoryProposals
from app.service.chats.memory.remember_tool import remember_tool
from app.service.chats.open_chat import OpenChat
from app.service.chats.project_book import ProjectBook
from app.service.chats.quick_ask import QuickAsk
from app.service.chats.temporary import TemporaryChats, is_temporary
from app.service.chats.vision import chat_vision, model_vision
from app.service.documents.document_context import ChatDocuments
from app.service.documents.documents_service import DocumentsService
from app.service.event_bus import EventBus, Listener, TaskGroup
from app.service.events import (ActivityChanged, ConversationsListed, DamagedHistoryFound, Problem,
                                SettingsChanged)
from app.service.library.library_service import LibraryService
from app.service.library.remote_servers import RemoteServers
from app.service.library.speech_shelf import SpeechShelf
from app.service.models.background import AppWindow, WindowPresence, WindowState
from app.service.models.calibration import SpeedCalibration
from app.service.models.engine_handle import EngineHandle
from app.service.models.model_session import ModelSession
from app.service.models.model_setup import ModelSetup
from app.service.settings_keeper import SettingsKeeper
from app.service.storage import Storage
from app.service.tools.tool_use import Approver, ToolUse
from app.service.voice.dictation_service import Dictation
from app.service.voice.read_aloud import ReadAloud
from app.service.voice.voice_mode import VoiceMode


class Service:
    """Builds the owners, opens and closes them, and does what crosses their wings.

    Front ends hold this only to start it (`open`, or `start_up` for the window), stop it
    (`shutdown`), hear its events (`subscribe`), run work on its loop (`spawn`) and hand the
    API server its door (`api`); everything else they do goes through the doors made from it
    (app/service/doors/), each exposing what one front end uses. The owners are attributes
    for the doors (and the service tests); no owner knows this class.

    Built in dependency order, each owner gets its collaborators. Two cycles are real and
    remain as callables: the model session loads with the open chat's context length
    (`context_length`), while the open chat takes a new chat's defaults from the session's
    model; and the session and the library reload or unload nothing while an answer is
    written or waits (`_answers_busy`, `answer_writing`), while the answers are built on the
    session. The storage opens after the owners are built (`open`): they reach it through
    `_storage`.
    """

    def __init__(self, *, history_path: Path, settings_path: Path | None, library: ModelLibrary,
                 client: EngineHandle, settings: Settings | None = None, mcp_file: Path | None = None,
                 approver: Approver | None = None, calibrate: bool = False, memory_path: Path | None = None) -> None:
        """memory_path: the history file that holds the memories, where the history itself is another (the
        CLI's chat, answered in memory); None: the history's own."""
        self._history_path, self._settings_path = history_path, settings_path
        self._memory_path = memory_path
        self.storage: Storage | None = None
        self.memory_storage: Storage | None = None  # memory_path's, once open
        self.bus = bus = EventBus()
        self.tasks = tasks = TaskGroup(asyncio.get_event_loop())
        emit, storage = bus.emit, self._storage
        self.keeper = keeper = SettingsKeeper(storage, emit, settings)
        self.session = session = ModelSession(
            client, ModelSetup(library, emit), bus, tasks, keeper,
            context_length=lambda: self.chat.context_length(), answers_busy=self._answers_busy,
            answer_writing=lambda: self.answers.writing,
            threads_file=settings_path.parent / "threads.json" if settings_path else None)
        self.library = LibraryService(session, keeper, emit, tasks, answers_busy=self._answers_busy)
        # Models → Speech: the speech models and voices, shipped, downloaded or offered.
        self.speech = SpeechShelf(data_paths().data / "speech", lambda: keeper.settings, self.update_settings,
                                  self.library.hardware_report, lambda: self.library.downloads, emit,
                                  tasks.spawn, release=self._release_speech)
        # The servers the person added, in the files the engine's remote backend reads too (app/library/servers).
        self.servers = RemoteServers(ServerBook.at(data_paths()), session, answers_busy=self._answers_busy)
        self.drafts = DraftBook(lambda: self.storage, emit, tasks.spawn)
        # Temporary chats live in memory: the chat owners reach the history through its router.
        self.temporary = TemporaryChats(storage, bus, tasks.spawn, show=lambda chat_id: self.answers.show(chat_id),
                                        discard=lambda chat_id: self.answers.delete(chat_id))
        chats_storage = self.temporary.routed
        self.conversations = conversations = Conversations(chats_storage, emit, keeper, self.drafts,
                                                           lambda: session.chat_defaults_model)
        self.chat = chat = OpenChat(conversations, bus)
        # Projects: named groups of chats whose new chats start with the project's instructions, model and tools.
        self.projects = ProjectBook(storage, emit, conversations.new_chat_settings)
        # mcp.json sits beside settings.json (app.core.paths); a CLI chat with no settings file names it.
        self.tools = ToolUse(mcp_file or (settings_path.with_name("mcp.json") if settings_path else None),
                             keeper, emit, approver=approver)
        # The person's memories: each answer's share of them, and the remember tool the model may call.
        # With an embedding model chosen for the documents, memories are chosen by meaning too: their vectors
        # made by the documents' model, in the background while no answer is written and indexing may run.
        self.memory = memory = MemoryBook(self._memories, lambda: self.storage, emit, lambda: keeper.settings,
                                          session.clear_saved_states, tasks.spawn,
                                          embed=lambda texts: self.collections.embed_for_memory(texts),
                                          quiet=lambda: not self._answers_busy()
                                          and not self.collections.waiting_because())
        self.tools.add_builtin(remember_tool(memory, lambda: keeper.settings))
        # After a chat, the loaded model is asked in the background (giving way) which facts to propose keeping.
        self.memory_proposals = MemoryProposals(memory, session, conversations, bus, tasks, lambda: keeper.settings,
                                                answers_busy=self._answers_busy, temporary=is_temporary)
        # The window's collections, indexed in the background; it holds while an answer streams (it hears
        # the answers' events after the owners that keep the open chat in step: subscribed last).
        self.collections = DocumentsService(emit, library=library, settings=lambda: keeper.settings,
                                            save_settings=keeper.save, read_power=read_power)
        self.documents = ChatDocuments(lambda: loaded.context_length if (loaded := session.loaded) else None,
                                       count=session.client.count_tokens)
        self.documents.use_search(collection_search(self.collections))
        self.collection_choice = ChatCollections(chats_storage, chat, conversations, bus)
        self.sight = chat_vision(chat, session, lambda: (row.model for row in self.library.rows), self.servers.known)
        self.answers = answers = Answering(
            storage=chats_storage, history_open=lambda: self.storage is not None, emit=emit, tasks=tasks, chat=chat,
            conversations=conversations, session=session, keeper=keeper, tools=self.tools, documents=self.documents,
            vision=self.sight.state, pending_collections=self.collection_choice.take_pending,
            remember=memory.for_answer, remote=self.servers.named)
        # Quick ask's exchange: a chat of its own, answered by the app's model in the same line.
        self.quick_ask = QuickAsk(answers, keeper, model_vision(lambda: None, session,
                                  lambda: (row.model for row in self.library.rows)).state, tasks.spawn)
        # /v1/embeddings answers with the documents' embedding model, through the documents' own process.
        self.api = ApiAnswers(session, keeper, conversations, emit, spawn=tasks.spawn,
                              chats_busy=lambda: not answers.queue.idle,
                              embeddings=ApiEmbeddings(self.collections, library, lambda: keeper.settings.server),
                              remember=memory.for_api, remote=self.servers,
                              voice=ApiVoice(data_paths().data / "speech"))
        # calibrate: the front ends that stay running and keep threads.json (the window, `kestrel serve`) measure the
        # loaded model's speed in the background when this machine measured none (app/service/models/calibration.py).
        self.calibration = SpeedCalibration(session, keeper, bus, tasks, answers_busy=self._answers_busy,
                                            measured=self.library.remeasured) if calibrate and settings_path else None
        self.files = ChatFiles(chats_storage, emit)
        self.history_choice = HistoryChoice(storage, emit, conversations, answers_busy=lambda: not answers.queue.idle,
                                            open_id=lambda: chat.id, show_new=answers.show_new, show=answers.show)
        self.elsewhere = HistoryFollower(storage, bus, tasks.loop, conversations, chat,
                                         busy=lambda: answers.open_chat_busy, show_new=answers.show_new,
                                         show=answers.show)
        bus.subscribe(self.collections.hear)
        bus.subscribe(memory.hear)
        self.presence = WindowPresence()  # the main and quick-ask windows' states; the engine follows the most awake
        self.subscribe: Callable[[Listener], Callable[[], None]] = bus.subscribe
        self.spawn = tasks.spawn
        # The window's dictation: the microphone on the person's press, the transcription child kept between presses.
        self.dictation = Dictation(lambda: keeper.settings.voice, data_paths().data / "speech", tasks.spawn)
        # The window's answers read aloud (a press, or each as it streams when the setting says so: its door
        # has it listen to the answers); the voice's child kept between readings.
        self.read_aloud = ReadAloud(lambda: keeper.settings.voice, data_paths().data / "speech", tasks.spawn)
        # Voice mode: listen, answer aloud, listen again, in the open chat; its turns keep the engine going.
        self.voice_mode = VoiceMode(lambda: keeper.settings.voice, self.dictation, self.read_aloud, answers,
                                    lambda: chat.id, bus.subscribe, tasks.spawn, self._voice_turn)

    def _voice_turn(self, on: bool) -> None:
        """Voice mode's turn began (the person is heard or answered aloud) or ended."""
        self.set_window_state(WindowState.FOREGROUND if on else WindowState.HIDDEN, AppWindow.VOICE)

    def _answers_busy(self) -> bool:
        """A chat's or an API request's answer is written or waits: nothing reloads or unloads."""
        return not self.answers.queue.idle or self.api.busy

    def _memories(self) -> Storage | None:
        """The storage that holds the memories: the history's own, or memory_path's."""
        return self.storage if self._memory_path is None else self.memory_storage

    def _storage(self) -> Storage:
        if self.storage is None:
            raise RuntimeError("Service.open() was not awaited")
        return self.storage

    @property
    def history_damage(self) -> HistoryDamaged | None:
        """The damage found in the history file, until the user chose what to do."""
        return self.storage.history_damage if self.storage is not None else None

    # --- start and stop -----------------------------------------------------------------------

    async def open(self) -> None:
        """Open the history and read the settings (off the event loop).

        A damaged history file is left as it is, reported (DamagedHistoryFound) and
        replaced by one in memory until the user chooses (HistoryDoor's recover_history or
        start_fresh_history); everything else goes on. HistoryError if the history cannot be
        used for another reason; the message is for the user.
        """
        # A large history from an older Kestrel is migrated here (an index is built):
        # seconds, on the writer thread, with the window already up.
        self.bus.emit(ActivityChanged("Opening your chats…"))
        self.storage = storage = await Storage.open(self._history_path, self._settings_path)
        storage.on_damaged = self._history_damaged
        self.bus.emit(ActivityChanged("Idle"))
        self.keeper.adopt(storage)
        self.bus.emit(SettingsChanged(self.keeper.settings))
        # A window hidden before the settings were read (started in the tray) was paced by the defaults.
        self._pace_follows(self.presence.state)
        if storage.settings_problem:
            self.bus.emit(Problem(storage.settings_problem, "disk"))
        if storage.history_damage is not None:
            self._history_damaged(storage.history_damage)
        await self.drafts.load()
        if self._memory_path is not None and self.keeper.settings.memory.enabled:
            self.memory_storage = await _memories_beside(self._memory_path)
        await self.memory.load()
        await storage.run(self.session.threads.load)
        if self._settings_path is not None and self.library.downloads is None:
            await self.library.open_downloads(self._settings_path.parent / "downloads.json")
            if self.library.downloads is not None:
                self.library.downloads.subscribe(self.speech.download_changed)

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
            await self.answers.show(conversations[0].id)
        else:
            self.answers.show_new()
        await self.collections.start()  # after the chat is shown: its imports take a moment
        if recovered:
            self.bus.emit(Problem(f"{recovered} answer(s) were cut off when Kestrel last closed; "
                                  "they are kept and marked as interrupted.", "history"))
        await self.session.load_default(self.keeper.settings.default_model)

    async def shutdown(self) -> None:
        """Stop cleanly: end the answer (its text is saved), then the engine and the history."""
        self.session.stop_for_shutdown()
        task = self.answers.queue.close()
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                task.cancel()
        ending = self.quick_ask.end()  # a quick-ask exchange not to keep is deleted before the history closes
        if ending is not None:
            try:
                await asyncio.wait_for(asyncio.shield(ending), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                ending.cancel()
        await self.drafts.flush()
        await self.tools.close()  # no MCP server outlives Kestrel
        await self.voice_mode.close()
        await self.dictation.close()  # the microphone closed and the transcription child ended
        await self.read_aloud.close()  # the sound stopped and the synthesis child ended
        await self.api.voice.close()  # the API's transcription and synthesis children ended
        await self.tasks.cancel_all()
        await self.library.close()
        await self.collections.close()
        await self.session.client.shutdown()
        if self.storage is not None:
            await self.storage.close()
        if self.memory_storage is not None:
            await self.memory_storage.close()
        await self.temporary.close()

    # --- what crosses the wings: the settings and the window's state ----------------------------

    async def _release_speech(self, speech_id: str) -> bool:
        """Dictation, read-aloud and the API server let go of a speech model or voice about to be removed (False: in
        use now)."""
        return (await self.dictation.release(speech_id) and await self.read_aloud.release(speech_id)
                and await self.api.voice.release(speech_id))

    async def update_settings(self, settings: Settings) -> None:
        """Save the app's settings (if changed); a new device or thread count reloads the model."""
        before = self.keeper.settings
        await self.keeper.save(settings)
        self.bus.emit(SettingsChanged(self.keeper.settings))
        self._pace_follows(self.presence.state)  # what hidden or background does may have changed
        await self.session.settings_changed(before, settings)

    def set_window_state(self, state: WindowState, window: AppWindow = AppWindow.MAIN) -> None:
        """One of Kestrel's windows came to the front, went behind another app, or was hidden:
        the engine pauses, runs gently or at full speed as the settings say (background.py) for
        the most awake of them (the quick-ask window shown while the main one waits in the tray
        runs it at full speed), and the documents look for changed files when the main one comes back
        (not for a quick ask, whose answer should have the machine to itself)."""
        if state == WindowState.FOREGROUND and window == AppWindow.MAIN:
            self.collections.window_shown()  # files may have changed meanwhile: a rescan
        self._pace_follows(self.presence.report(window, state))
        if window == AppWindow.MAIN:
            self.voice_mode.window_hidden(state == WindowState.HIDDEN)

    def _pace_follows(self, state: WindowState) -> None:
        if self.session.set_window_state(state):
            answering = self.answers.queue.answering_id
            self.bus.emit(ActivityChanged(self.session.pace.words() or (self.answers.activity_words()
                                                                         if answering is not None else "Idle"),
                                          answering))


async def _memories_beside(path: Path) -> Storage | None:
    """The history file at `path` opened for its memories alone; None (answers go without them) when there
    is none yet (nothing is written for a chat kept in memory), it cannot be opened, or it is damaged (the
    window offers the choice then)."""
    if not path.exists():
        return None
    try:
        storage = await Storage.open(path, None)
    except HistoryError:
        return None
    if storage.history_damage is not None:
        await storage.close()
        return None
    return storage
