"""Sending, regenerating and editing: the message saved at once, the answers one chat at a time."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence

from app.core.attachments import AttachedFile, AttachedImage
from app.core.conversation import Message, Role
from app.core.store.history import HistoryError, HistoryStore
from app.library.installed import InstalledModel
from app.service.chats.answer_queue import AnswerQueue, Turn
from app.service.chats.answer_run import AnswerRun, Remembering
from app.service.chats.conversations import Conversations
from app.service.documents.document_context import ChatDocuments
from app.service.event_bus import TaskGroup
from app.service.events import (WRITING, ActivityChanged, AnswerQueueChanged, BusyChanged, Event, ModelState, Problem,
                                SendFailed)
from app.service.models.model_session import ModelSession
from app.service.chats.open_chat import OpenChat
from app.service.chats.recipient import Recipient
from app.service.settings_keeper import SettingsKeeper
from app.service.storage import Storage
from app.service.chats.streaming import StreamingAnswer
from app.service.tools.tool_use import ToolUse
from app.service.chats.vision import VisionState, vision_state

WAITING_FOR_MODEL = "Your message will be sent when the model is ready…"
# What a message with files and no words asks; kept as its text, so the chat shows what was asked.
FILES_ONLY_QUESTION = "Summarise the attached file."
FILES_ONLY_QUESTION_MANY = "Summarise the attached files."
IMAGES_ONLY_QUESTION = "Describe the attached image."
IMAGES_ONLY_QUESTION_MANY = "Describe the attached images."


class Answering:
    """What a chat's Send, Regenerate, Edit and Stop do.

    The user's message is saved at once, whichever chat is being answered; its answer
    joins `queue` and is written when the chats that asked before it have theirs. The
    chat's own model (Conversation.model) is loaded first when it is not the loaded one.
    Emits AnswerQueueChanged when the line changes and BusyChanged when the open chat
    starts or stops being answered or waiting, or another chat is shown (`show`, `show_new`:
    a chat opened here shows all of its answer written so far).
    """

    def __init__(self, *, storage: Callable[[], Storage], history_open: Callable[[], bool],
                 emit: Callable[[Event], None], tasks: TaskGroup, chat: OpenChat, conversations: Conversations,
                 session: ModelSession, keeper: SettingsKeeper, tools: ToolUse | None = None,
                 documents: ChatDocuments | None = None, vision: Callable[[], VisionState] | None = None,
                 pending_collections: Callable[[], tuple[str, ...] | None] = lambda: None,
                 remember: Remembering | None = None,
                 remote: Callable[[str], InstalledModel | None] | None = None) -> None:
        self._storage = storage
        self._history_open = history_open  # False until the front end's start opened it: nothing can be saved
        self._pending_collections = pending_collections  # chosen for a new chat, saved with its first message
        self._emit = emit
        self._spawn = tasks.spawn
        self._chat = chat
        self._conversations = conversations
        self._session = session
        self._keeper = keeper
        self._tools = tools
        self._documents = documents
        self._vision = vision  # the open chat's model: whether it takes images (None: ask no one, send them)
        self._remember = remember  # each answer's memories (MemoryBook.for_answer); None: none
        # A chat's model on a server the person added, by its SERVER/MODEL id (RemoteServers.named; blocking).
        self._remote = remote
        self.queue = AnswerQueue(self._serve, tasks.spawn, self._changed)
        self._open_busy = False

    @property
    def open_chat_busy(self) -> bool:
        return self.queue.turn_of(self._chat.id) is not None

    @property
    def writing(self) -> bool:
        """The engine is writing an answer now (not loading a model for one, not waiting)."""
        run = self.queue.run
        return run is not None and run.running

    def activity_words(self) -> str:
        """What the status line says of the answer being written (Writing…, or Thinking…
        while a reasoning model thinks)."""
        run = self.queue.run
        return run.activity_words if run is not None else WRITING

    def live_answer(self, conversation_id: int) -> StreamingAnswer | None:
        """The answer being written into this chat, as far as it got."""
        run = self.queue.run
        stream = run.stream if run is not None else None
        return stream if stream is not None and stream.message.conversation_id == conversation_id else None

    def send(self, text: str, attachments: Sequence[AttachedFile] = (), images: Sequence[AttachedImage] = ()) -> bool:
        """Save the user's message in the open chat; its answer follows in turn (`send_to`).

        The collections chosen for a new chat before this first message (`pending_collections`)
        are taken now and saved with it; the chat's draft is emptied."""
        chat, opened = self._chat, self._chat.opened
        open_id = chat.id
        recipient = Recipient(open_id, chat.model_id(), saved=lambda conversation: chat.adopt(conversation, opened),
                              add=chat.add, untitled=chat.untitled, collections=self._pending_collections,
                              vision=self._vision)
        if not self.send_to(recipient, text, attachments, images):
            return False
        self._conversations.drafts.put(open_id, "")  # sent: no longer a draft
        return True

    def send_to(self, recipient: Recipient, text: str, attachments: Sequence[AttachedFile] = (),
                images: Sequence[AttachedImage] = ()) -> bool:
        """Save the user's message in the recipient's chat (a new one, titled by the message, when
        it has none yet); its answer follows in turn, in the one line every chat waits in.

        False if it cannot be taken: no text, file or image, no history, this chat is already
        being answered or waiting, or images for a model that cannot see them (a Problem says
        so: the front end keeps what was typed and attached). Files without words ask for a summary
        (FILES_ONLY_QUESTION), images without words for a description (IMAGES_ONLY_QUESTION),
        saved as the message's text."""
        if (not (text.strip() or attachments or images) or not self._history_open()
                or self.queue.turn_of(recipient.conversation_id, recipient.asker) is not None):
            return False
        if images and recipient.vision is not None and not (sight := recipient.vision()).available:
            self._emit(Problem(f"{sight.reason} Your message was not sent: send it without the images, or choose "
                               "a model that sees them.", "model", recipient.conversation_id))
            return False
        if not text.strip():
            text = _question_for(attachments, images)
        turn = self.queue.join(recipient.conversation_id, recipient.model_id, recipient.asker)
        self._spawn(self._send(turn, recipient, storable(text), tuple(attachments), recipient.collections(),
                               tuple(images)))
        return True

    async def _send(self, turn: Turn, recipient: Recipient, text: str, attachments: tuple[AttachedFile, ...] = (),
                    collections: tuple[str, ...] | None = None, images: tuple[AttachedImage, ...] = ()) -> None:
        conversation_id = turn.conversation_id
        try:
            if conversation_id is None:
                conversation = await self._conversations.create(_title_from(text), turn.model_id)
                conversation_id = conversation.id
                recipient.saved(conversation)
                self.queue.name(turn, conversation_id)
            elif recipient.untitled(conversation_id):
                # Made before its first message (its settings were changed first): the
                # message names it, as it names a chat made by sending.
                await self._conversations.name_by_first_message(conversation_id, _title_from(text))
            if collections is not None:
                await self._storage().history(HistoryStore.set_collections, conversation_id, collections)
            message = await self._storage().history(HistoryStore.add_message, conversation_id, Role.USER, text,
                                                    attachments=attachments, images=images)
            await self._conversations.refresh(conversation_id)
        except (HistoryError, KeyError) as exc:
            words = str(exc) if isinstance(exc, HistoryError) else "That chat is gone."
            self._unsent(turn, recipient, conversation_id, text,
                         Problem(f"{words} Your message is back in the message box.", "history", conversation_id))
            return
        except Exception as exc:  # noqa: BLE001 - a bug must not leave the chat busy for ever
            self._unsent(turn, recipient, conversation_id, text, Problem(
                f"Kestrel could not send the message ({type(exc).__name__}: {exc}). It is back in the message "
                "box; please report this.", conversation_id=conversation_id))
            return
        recipient.add(message)
        self.queue.ready(turn)

    def _unsent(self, turn: Turn, recipient: Recipient, conversation_id: int | None, text: str,
                problem: Problem) -> None:
        """The message was not saved: it goes back to its chat's draft (or its sender), never lost."""
        self.queue.drop(turn)
        if recipient.unsent is not None:
            recipient.unsent(text)
        else:
            self._conversations.drafts.put(conversation_id, text)
            self._emit(SendFailed(conversation_id, text))
        self._emit(problem)

    def regenerate(self) -> bool:
        """The last answer is replaced; a last message left unanswered (stopped while it
        waited, or the model failed) is answered. It waits its turn like a message sent."""
        conversation, messages = self._chat.conversation, self._chat.messages
        if conversation is None or not messages or self.open_chat_busy:
            return False
        last = messages[-1]
        if last.role == Role.SYSTEM:
            return False
        turn = self.queue.join(conversation.id, conversation.model)
        self._spawn(self._replace_from(turn, last if last.role == Role.ASSISTANT else None, None))
        return True

    def edit_and_resend(self, message_id: int, text: str) -> bool:
        """The message's files and images stay with its new text (words left empty ask for a
        summary or a description)."""
        conversation = self._chat.conversation
        if conversation is None or self.open_chat_busy:
            return False
        message = next((m for m in self._chat.messages if m.id == message_id), None)
        if message is None or message.role != Role.USER or not (text.strip() or message.attachments or message.images):
            return False
        if not text.strip():
            text = _question_for(message.attachments, message.images)
        turn = self.queue.join(conversation.id, conversation.model)
        self._spawn(self._replace_from(turn, message, storable(text)))
        return True

    async def _replace_from(self, turn: Turn, first: Message | None, new_text: str | None) -> None:
        try:
            storage = self._storage()
            if first is not None:
                await storage.history(HistoryStore.delete_messages_from, first.conversation_id, first.id)
                self._chat.remove_from(first)
                if new_text is not None:
                    added = await storage.history(HistoryStore.add_message, first.conversation_id, Role.USER,
                                                  new_text, attachments=first.attachments, images=first.images)
                    self._chat.add(added)
        except (HistoryError, KeyError) as exc:
            self._emit(Problem(str(exc) if isinstance(exc, HistoryError) else "That message is gone.", "history",
                               turn.conversation_id))
            self.queue.drop(turn)
            return
        except Exception as exc:  # noqa: BLE001 - a turn left in the line would block every chat after it
            self._emit(Problem(f"Kestrel could not replace the answer ({type(exc).__name__}: {exc}); "
                               "please report this.", conversation_id=turn.conversation_id))
            self.queue.drop(turn)
            return
        self.queue.ready(turn)

    def stop(self, conversation_id: int | None = None) -> None:
        if conversation_id is None:
            conversation_id = self._chat.id
        turn = self.queue.turn_of(conversation_id)
        if turn is not None:
            self.queue.drop(turn)

    async def leave(self, conversation_id: int) -> None:
        """The chat is being deleted: a waiting answer leaves the line, one being written
        is stopped (and saved); returns once it has ended."""
        turn = self.queue.turn_of(conversation_id)
        if turn is not None:
            self.queue.drop(turn)
            await turn.ended.wait()

    # --- which chat is shown: its Send may turn into Stop, and its answer shows as far as it got ---

    def show_new(self) -> None:
        """An empty chat; it is saved when its first message is sent."""
        self._chat.show_new()
        self.busy_maybe_changed(always=True)

    async def show(self, conversation_id: int) -> None:
        """Show a saved chat (read on the writer thread), with all of its answer being written that
        arrived; nothing is loaded for it."""
        if await self._chat.show(conversation_id, self.live_answer):
            self.busy_maybe_changed(always=True)

    async def delete(self, conversation_id: int) -> bool:
        """Delete a chat and its messages: a waiting answer leaves the line, one being written is
        stopped (and saved) first; a chat deleted while shown gives way to a new one."""
        await self.leave(conversation_id)
        if not await self._conversations.delete(conversation_id):
            return False
        if self._chat.id == conversation_id:
            self.show_new()
        return True

    def _changed(self) -> None:
        self._emit(AnswerQueueChanged(self.queue.answering_id, self.queue.waiting_ids))
        self.busy_maybe_changed()
        if self.queue.idle:
            self._emit(ActivityChanged(self._session.pace.words() or "Idle"))

    def busy_maybe_changed(self, always: bool = False) -> None:
        """BusyChanged if the open chat's Send/Stop changed (always: another chat opened)."""
        busy = self.open_chat_busy
        if busy != self._open_busy or always:
            self._open_busy = busy
            self._emit(BusyChanged(busy))

    async def _serve(self, turn: Turn) -> None:
        """The queue's turn for one chat: its model ready, then its answer written."""
        session, settings = self._session, self._keeper.settings
        conversation_id = turn.conversation_id
        assert conversation_id is not None
        try:
            if not await self._model_ready_for(turn, conversation_id):
                return
            session.idle_timer.stop()
            threads = session.answer_threads(settings)
            run = turn.run = AnswerRun(self._storage(), session.engine, self._emit, show=self._chat.add,
                                       tools=self._tools, tool_rounds=settings.tool_rounds,
                                       settle=self._chat.replace, pace_words=session.pace.words,
                                       threads=threads,
                                       frame=self._documents.frame if self._documents is not None else None,
                                       vision=vision_state(session.model, session.loaded), remember=self._remember,
                                       builtin_tools=session.loaded is not None and session.loaded.calls_tools)
            try:
                await run.run(conversation_id, session.ensure_context)
            finally:
                session.idle_timer.restart()
                session.learn_threads(run.finished.stats if run.finished is not None else None)
            await self._conversations.refresh(conversation_id)  # it moves to the top
        except (HistoryError, KeyError):
            pass  # Deleted meanwhile, or the disk problem was already shown.
        except Exception as exc:  # noqa: BLE001 - the chats waiting after it must still be answered
            self._emit(Problem(f"Kestrel could not answer ({type(exc).__name__}: {exc}); please report this.",
                               conversation_id=conversation_id))

    async def _model_ready_for(self, turn: Turn, conversation_id: int) -> bool:
        """Load the model this chat answers with, unless it is loaded; False (said) if none can be."""
        session = self._session
        wanted = await self._chat_model(turn.model_id)
        tried = False
        while True:
            target = wanted or session.model
            if session.state == ModelState.READY and (target is None or same_model(session.model, target)):
                return True
            self._emit(ActivityChanged(WAITING_FOR_MODEL, conversation_id))
            if session.state in (ModelState.LOADING, ModelState.INSTALLING):
                await session.moves()
                continue
            broken = (session.state == ModelState.FAILED and session.load_error is not None
                      and same_model(session.model, target))
            if tried or target is None or broken:
                self._emit(Problem(_no_model_words(target), "model", conversation_id))
                return False
            tried = True
            # A task of its own: this chat leaving the line must not cancel the load.
            self._spawn(session.load_model(target, for_chat=not same_model(target, session.app_model)))
            await session.moves()

    async def _chat_model(self, model_id: str | None) -> InstalledModel | None:
        """The model a chat answers with: its own if installed here or on a server the person added (SERVER/MODEL),
        else the app's."""
        app_model = self._session.app_model
        if model_id is not None and (app_model is None or model_id != app_model.id):
            own = await asyncio.to_thread(self._session.setup.library.get, model_id)
            if own is None and self._remote is not None:
                own = await asyncio.to_thread(self._remote, model_id)
            if own is not None and not own.missing:
                return own
        return app_model


def _question_for(files: Sequence[AttachedFile], images: Sequence[AttachedImage]) -> str:
    """What a message with files or images and no words asks (files first: their summary is the
    longer work, and the images are then part of what it is about)."""
    if files:
        return FILES_ONLY_QUESTION if len(files) == 1 else FILES_ONLY_QUESTION_MANY
    return IMAGES_ONLY_QUESTION if len(images) == 1 else IMAGES_ONLY_QUESTION_MANY


def _no_model_words(target: InstalledModel | None) -> str:
    if target is None:
        return ("No model is ready: import a model file, or fix the problem shown in the status bar. "
                "Your message is kept.")
    return (f"{target.title} could not be loaded (the status bar says why). Your message is kept: "
            "choose another model for this chat, then press Regenerate.")


def same_model(one: InstalledModel | None, other: InstalledModel | None) -> bool:
    """Both are the same library model (the objects differ once its settings change)."""
    return one is not None and other is not None and one.id == other.id


def storable(text: str) -> str:
    """The text with anything UTF-8 cannot hold (a lone surrogate, from a command line
    with undecodable bytes or a broken paste) as U+FFFD: SQLite refused it with a
    UnicodeEncodeError and the message was silently lost."""
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _title_from(text: str) -> str:
    first = text.strip().splitlines()[0]
    return first if len(first) <= 48 else first[:47].rstrip() + "…"
