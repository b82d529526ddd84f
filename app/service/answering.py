"""Sending, regenerating and editing: the message saved at once, the answers one chat at a time."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

from app.core.conversation import UNTITLED, Message, Role
from app.core.history import HistoryError, HistoryStore
from app.library.models import InstalledModel
from app.service.answer_queue import AnswerQueue, Turn
from app.service.answer_run import AnswerRun
from app.service.background import Pace
from app.service.events import (ActivityChanged, AnswerQueueChanged, BusyChanged, ConversationChanged, ModelState,
                                Problem, SendFailed)
from app.service.threads import model_key

if TYPE_CHECKING:
    from app.service.controller import ChatController

WAITING_FOR_MODEL = "Your message will be sent when the model is ready…"


class Answering:
    """What a chat's Send, Regenerate, Edit and Stop do, for the ChatController.

    The user's message is saved at once, whichever chat is being answered; its answer
    joins `queue` and is written when the chats that asked before it have theirs. The
    chat's own model (Conversation.model) is loaded first when it is not the loaded one.
    Emits AnswerQueueChanged when the line changes and BusyChanged when the open chat
    starts or stops being answered or waiting.
    """

    def __init__(self, controller: ChatController) -> None:
        self._c = controller
        self.queue = AnswerQueue(self._serve, controller.spawn, self._changed)
        self._open_busy = False

    @property
    def open_chat_busy(self) -> bool:
        conversation = self._c.conversation
        return self.queue.turn_of(conversation.id if conversation is not None else None) is not None

    def send(self, text: str) -> bool:
        """False if it cannot be taken: no text, no history, or this chat is already
        being answered or waiting."""
        c = self._c
        if not text.strip() or c.storage is None or self.open_chat_busy:
            return False
        open_id = c.conversation.id if c.conversation is not None else None
        turn = self.queue.join(open_id, c.conversation_model_id())
        c.drafts.put(open_id, "")  # sent: no longer a draft
        c.spawn(self._send(turn, storable(text), c.opened))
        return True

    async def _send(self, turn: Turn, text: str, opened: int) -> None:
        c = self._c
        conversation_id = turn.conversation_id
        try:
            if conversation_id is None:
                conversation = await c.create_conversation(_title_from(text), turn.model_id)
                conversation_id = conversation.id
                if c.opened == opened and c.conversation is None:
                    c.conversation = conversation  # the user still looks at it
                    c._emit(ConversationChanged(conversation))  # now as the open chat
                self.queue.name(turn, conversation_id)
            elif _untitled(c, conversation_id):
                # Made before its first message (its settings were changed first): the
                # message names it, as it names a chat made by sending.
                await c._storage().history(HistoryStore.rename_conversation, conversation_id, _title_from(text))
            message = await c._storage().history(HistoryStore.add_message, conversation_id, Role.USER, text)
            await c.refresh_conversation(conversation_id)
        except (HistoryError, KeyError) as exc:
            words = str(exc) if isinstance(exc, HistoryError) else "That chat is gone."
            self._unsent(turn, conversation_id, text, Problem(f"{words} Your message is back in the message box.",
                                                              "history"))
            return
        except Exception as exc:  # noqa: BLE001 - a bug must not leave the chat busy for ever
            self._unsent(turn, conversation_id, text, Problem(
                f"Kestrel could not send the message ({type(exc).__name__}: {exc}). It is back in the message "
                "box; please report this."))
            return
        c.add_to_open(message)
        self.queue.ready(turn)

    def _unsent(self, turn: Turn, conversation_id: int | None, text: str, problem: Problem) -> None:
        """The message was not saved: it goes back to its chat's draft, never lost."""
        c = self._c
        self.queue.drop(turn)
        c.drafts.put(conversation_id, text)
        c._emit(SendFailed(conversation_id, text))
        c._emit(problem)

    def regenerate(self) -> bool:
        """The last answer is replaced; a last message left unanswered (stopped while it
        waited, or the model failed) is answered. It waits its turn like a message sent."""
        c = self._c
        if c.conversation is None or not c.messages or self.open_chat_busy:
            return False
        last = c.messages[-1]
        if last.role == Role.SYSTEM:
            return False
        turn = self.queue.join(c.conversation.id, c.conversation.model)
        c.spawn(self._replace_from(turn, last if last.role == Role.ASSISTANT else None, None))
        return True

    def edit_and_resend(self, message_id: int, text: str) -> bool:
        c = self._c
        if not text.strip() or c.conversation is None or self.open_chat_busy:
            return False
        message = next((m for m in c.messages if m.id == message_id), None)
        if message is None or message.role != Role.USER:
            return False
        turn = self.queue.join(c.conversation.id, c.conversation.model)
        c.spawn(self._replace_from(turn, message, storable(text)))
        return True

    async def _replace_from(self, turn: Turn, first: Message | None, new_text: str | None) -> None:
        c = self._c
        try:
            storage = c._storage()
            if first is not None:
                await storage.history(HistoryStore.delete_messages_from, first.conversation_id, first.id)
                c.remove_from(first)
                if new_text is not None:
                    added = await storage.history(HistoryStore.add_message, first.conversation_id, Role.USER,
                                                  new_text)
                    c.add_to_open(added)
        except (HistoryError, KeyError) as exc:
            c._emit(Problem(str(exc) if isinstance(exc, HistoryError) else "That message is gone.", "history"))
            self.queue.drop(turn)
            return
        except Exception as exc:  # noqa: BLE001 - a turn left in the line would block every chat after it
            c._emit(Problem(f"Kestrel could not replace the answer ({type(exc).__name__}: {exc}); "
                            "please report this."))
            self.queue.drop(turn)
            return
        self.queue.ready(turn)

    def stop(self, conversation_id: int | None = None) -> None:
        c = self._c
        if conversation_id is None and c.conversation is not None:
            conversation_id = c.conversation.id
        turn = self.queue.turn_of(conversation_id)
        if turn is not None:
            self.queue.drop(turn)

    def _changed(self) -> None:
        c = self._c
        c._emit(AnswerQueueChanged(self.queue.answering_id, self.queue.waiting_ids))
        self.busy_maybe_changed()
        if self.queue.idle:
            c._emit(ActivityChanged(c.pace.words() or "Idle"))

    def busy_maybe_changed(self, always: bool = False) -> None:
        """BusyChanged if the open chat's Send/Stop changed (always: another chat opened)."""
        busy = self.open_chat_busy
        if busy != self._open_busy or always:
            self._open_busy = busy
            self._c._emit(BusyChanged(busy))

    async def _serve(self, turn: Turn) -> None:
        """The queue's turn for one chat: its model ready, then its answer written."""
        c = self._c
        conversation_id = turn.conversation_id
        assert conversation_id is not None
        try:
            if not await self._model_ready_for(turn, conversation_id):
                return
            c.idle_timer.stop()
            threads = c.threads.choose(self._model_key(), c.settings.threads).threads
            if c.pace.pace == Pace.GENTLE and c.settings.gentle_fewer_threads:
                threads = max(1, threads // 2)  # as the user chose: gentler still
            run = turn.run = AnswerRun(c._storage(), c.engine, c._emit, show=c.add_to_open,
                                       settle=c.replace_in_open, activity=c.pace.words() or "Thinking…",
                                       threads=threads)
            try:
                await run.run(conversation_id, c.ensure_context)
            finally:
                c.idle_timer.restart()
                self._learn_threads(run.finished)
            await c.refresh_conversation(conversation_id)  # it moves to the top
        except (HistoryError, KeyError):
            pass  # Deleted meanwhile, or the disk problem was already shown.
        except Exception as exc:  # noqa: BLE001 - the chats waiting after it must still be answered
            c._emit(Problem(f"Kestrel could not answer ({type(exc).__name__}: {exc}); please report this."))

    async def _model_ready_for(self, turn: Turn, conversation_id: int) -> bool:
        """Load the model this chat answers with, unless it is loaded; False (said) if none can be."""
        c = self._c
        wanted = await self._chat_model(turn.model_id)
        tried = False
        while True:
            target = wanted or c.model
            if c.model_state == ModelState.READY and (target is None or same_model(c.model, target)):
                return True
            c._emit(ActivityChanged(WAITING_FOR_MODEL, conversation_id))
            if c.model_state in (ModelState.LOADING, ModelState.INSTALLING):
                await c.model_moves()
                continue
            broken = c.model_state == ModelState.FAILED and c.load_error is not None and same_model(c.model, target)
            if tried or target is None or broken:
                c._emit(Problem(_no_model_words(target), "model"))
                return False
            tried = True
            # A task of its own: this chat leaving the line must not cancel the load.
            c.spawn(c.load_model(target, for_chat=not same_model(target, c.app_model)))
            await c.model_moves()

    async def _chat_model(self, model_id: str | None) -> InstalledModel | None:
        """The model a chat answers with: its own if installed here, else the app's."""
        app_model = self._c.app_model
        if model_id is not None and (app_model is None or model_id != app_model.id):
            own = await asyncio.to_thread(self._c.setup.library.get, model_id)
            if own is not None and not own.missing:
                return own
        return app_model

    def _model_key(self) -> str:
        model = self._c.model
        return model_key(model.path, model.size) if model is not None else ""

    def _learn_threads(self, answer: Message | None) -> None:
        """An answer's speed teaches the thread advisor (saved on the writer thread)."""
        c = self._c
        c.busy_meter.look()  # the quiet spell before the next answer counts from here
        stats = answer.stats if answer is not None else None
        if stats is None or not stats.threads or c.storage is None:
            return
        c.threads.record(self._model_key(), stats.threads, stats.tokens, stats.tokens_per_s)
        c.spawn(c.storage.run(c.threads.save))


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


def _untitled(c: "ChatController", conversation_id: int) -> bool:
    """The open chat has no message yet and still has the title a chat gets before one."""
    open_now = c.conversation
    return (open_now is not None and open_now.id == conversation_id and not c.messages
            and open_now.title == UNTITLED)


def _title_from(text: str) -> str:
    first = text.strip().splitlines()[0]
    return first if len(first) <= 48 else first[:47].rstrip() + "…"
