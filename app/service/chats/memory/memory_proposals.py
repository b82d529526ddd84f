"""MemoryProposals: after a chat, Kestrel asks the loaded model which facts the person told it, and proposes them.

When: once a chat has been idle for IDLE_S after an answer (no new message sent in it), not when
the person leaves it. Leaving a chat is usually the moment they start another one and type at once,
so a request made then would be displaced at once; a chat left idle is one they are reading or done
with, the engine is free, and the proposal shows beside the chat it came from. Each answer finished
in this run marks its question (the person's message before it) to be read; what was read is not
read again, so an old chat reopened proposes only from what was said since.

How: one request of the loaded model with the person's messages as fenced data and the answer held
to a JSON schema (memory_extraction.py), greedy and short. It joins the engine's line as a request
that gives way (EngineQueue.request(gives_way=True)): any answer a person asks for, any load or
unload, cancels it between two tokens or takes its place in the line, so a person never waits for
it. Displaced, it is tried again after the next idle spell, at most MAX_TRIES times. It waits while
any answer is written or waits, while the engine is held or paused, and runs only for a local chat
model that is ready: a model on a server would be sent a request the person did not make.

Never: while memory.propose is off or memory is off in the settings (nothing is asked of the model),
for a chat with "Don't use my memories" (Conversation.memory False), for a temporary chat (the
`temporary` hook: a chat the front end keeps out of the history), or while no front end that can
show a proposal listens (`listen`: the window does; the CLI and the API server never ask).

Then: "ask" keeps each fact as a pending proposal (MemoryProposed) until the person answers it
(accept, with their own words if they edited it, or decline); "automatic" keeps it at once
(MemoryOrigin.PROPOSED, its chat) and says so (MemoryProposed with `kept`, for an Undo). A fact
declined, proposed or kept is not proposed again in this run.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Sequence
from enum import Enum

from app.core.answer_stats import FinishReason
from app.core.conversation import Message, Role
from app.core.memories import MemoryOrigin, MemoryRefused
from app.core.memory_settings import MemoryProposal
from app.core.settings import Settings
from app.core.store.history import HistoryError
from app.core.store.memories import AddedMemory
from app.engine.protocol import Delta, Done
from app.service.chats.conversations import Conversations
from app.service.chats.memory.memory_book import MemoryBook
from app.service.chats.memory.memory_extraction import (EXTRACTION_SETTINGS, MAX_MESSAGES, SHAPE,
                                                        extraction_messages, proposed_facts, same_fact)
from app.service.event_bus import EventBus, TaskGroup
from app.service.events import (AnswerFinished, AnswerStarted, ConversationRemoved, Event, ModelState, Pace, Problem,
                                SettingsChanged)
from app.service.memory_events import MemoryProposalSettled, MemoryProposed, ProposedMemory
from app.service.models.engine_errors import EngineError
from app.service.models.model_session import ModelSession

log = logging.getLogger(__name__)

# How long a chat stays without a new message after an answer before its facts are asked for: long
# enough that a person who goes on chatting is not raced, short enough that the proposal still shows
# beside the chat it came from.
IDLE_S = 30.0
# While answers are written or the engine is held, how often it looks again.
SETTLE_S = 1.0
# A request displaced by the person's own is tried again this many times in all, each after an idle spell.
MAX_TRIES = 3


class _Outcome(Enum):
    DONE = "done"          # asked (with or without facts), or nothing to ask
    DISPLACED = "displaced"  # a person's request (or a load) came first: try again later


class MemoryProposals:
    """The proposals after chats. It hears AnswerStarted, AnswerFinished, ConversationRemoved and
    SettingsChanged on the bus; `pending()` lists the proposals waiting for the person's answer;
    `accept(id, text=None)` and `decline(id)` answer one (MemoryProposalSettled says so). `listen(True)`
    is a front end saying it shows proposals (none are made before). `idle_s` and `settle_s` are the
    waits (tests shorten them). `temporary(chat id)`: whether a chat is a temporary one (never read; a
    temporary chat also has its memory switch off, app/service/chats/temporary.py, which is checked too).
    """

    def __init__(self, book: MemoryBook, session: ModelSession, conversations: Conversations, bus: EventBus,
                 tasks: TaskGroup, settings: Callable[[], Settings], *, answers_busy: Callable[[], bool],
                 temporary: Callable[[int], bool] = lambda chat: False,
                 idle_s: float = IDLE_S, settle_s: float = SETTLE_S) -> None:
        self._book, self._session, self._conversations = book, session, conversations
        self._emit, self._tasks, self._settings = bus.emit, tasks, settings
        self._answers_busy, self._temporary = answers_busy, temporary
        self.idle_s, self.settle_s = idle_s, settle_s
        self._listening = False
        self._answered: dict[int, list[int]] = {}  # chat id -> answers finished in this run, not read yet
        self._waits: dict[int, asyncio.Task[None]] = {}  # chat id -> its idle wait (and the asking after it)
        self._asking: set[int] = set()  # the chats whose facts are being asked for now
        self._pending: dict[int, ProposedMemory] = {}
        self._asked: set[str] = set()  # same_fact() of every fact proposed, declined or kept in this run
        self._ids = itertools.count(1)
        bus.subscribe(self._heard)

    def listen(self, on: bool) -> None:
        """A front end that shows proposals is there (True) or gone; none are asked for without one."""
        self._listening = on
        if not on:
            self._stop_waits()

    def pending(self) -> list[ProposedMemory]:
        """The proposals waiting for the person's answer, oldest first."""
        return list(self._pending.values())

    async def accept(self, proposal_id: int, text: str | None = None) -> AddedMemory:
        """Keep a proposed fact (in the person's words, when they changed it), from its chat. KeyError if
        it was answered already; MemoryRefused (the words) and HistoryError (the disk) leave it waiting."""
        proposal = self._pending[proposal_id]
        added = await self._book.add(proposal.text if text is None else text, MemoryOrigin.PROPOSED,
                                     proposal.conversation_id)
        self._asked.add(same_fact(added.memory.text))
        if self._pending.pop(proposal_id, None) is not None:
            self._emit(MemoryProposalSettled(proposal_id, added.memory))
        return added

    def decline(self, proposal_id: int) -> None:
        """"Not now": nothing is kept, and the fact is not proposed again in this run."""
        if self._pending.pop(proposal_id, None) is not None:
            self._emit(MemoryProposalSettled(proposal_id))

    # --- when ---------------------------------------------------------------------------------

    def _wanted(self) -> bool:
        memory = self._settings().memory
        return self._listening and memory.enabled and memory.propose is not MemoryProposal.OFF

    def _heard(self, event: Event) -> None:
        if isinstance(event, AnswerFinished) and self._wanted():
            chat = event.message.conversation_id
            if self._temporary(chat):
                return
            answered = self._answered.setdefault(chat, [])
            answered.append(event.message.id)
            del answered[:-MAX_MESSAGES]  # no more is read of a chat at once
            self._wait_then_ask(chat)
        elif isinstance(event, AnswerStarted):
            chat = event.message.conversation_id
            if chat not in self._asking:  # a request already made was displaced by this answer's own
                self._cancel_wait(chat)
        elif isinstance(event, ConversationRemoved):
            self._answered.pop(event.conversation_id, None)
            self._cancel_wait(event.conversation_id)
        elif isinstance(event, SettingsChanged) and not self._wanted():
            self._stop_waits()

    def _wait_then_ask(self, chat: int) -> None:
        self._cancel_wait(chat)
        self._waits[chat] = self._tasks.spawn(self._after_idle(chat))

    def _cancel_wait(self, chat: int) -> None:
        wait = self._waits.pop(chat, None)
        if wait is not None and chat not in self._asking:
            wait.cancel()

    def _stop_waits(self) -> None:
        for chat in list(self._waits):
            self._cancel_wait(chat)

    async def _after_idle(self, chat: int) -> None:
        me = asyncio.current_task()
        try:
            for _ in range(MAX_TRIES):
                await asyncio.sleep(self.idle_s)
                while self._busy():
                    await asyncio.sleep(self.settle_s)
                if self._waits.get(chat) is not me or not self._wanted():
                    return  # a newer answer in this chat waits its own idle spell
                if await self._ask(chat) is _Outcome.DONE:
                    return
        finally:
            if self._waits.get(chat) is me:
                del self._waits[chat]

    def _busy(self) -> bool:
        return self._answers_busy() or self._session.engine.busy or self._session.pace.pace == Pace.PAUSED

    def _model_ready(self) -> bool:
        session, model = self._session, self._session.model
        return (session.state == ModelState.READY and session.loaded is not None and model is not None
                and model.chats and not model.remote)

    # --- asking -------------------------------------------------------------------------------

    async def _ask(self, chat: int) -> _Outcome:
        """Ask the model for the facts in the person's messages of this chat answered since last read."""
        if not self._model_ready():
            return _Outcome.DONE  # a model loaded later reads the next chat; this one is not worth a load
        answered = list(self._answered.get(chat, ()))
        try:
            conversation = await self._conversations.get(chat)
            messages = await self._conversations.messages(chat)
            known = [memory.text for memory in await self._book.listing()]
        except (HistoryError, KeyError):
            return _Outcome.DONE
        self._answered[chat] = [answer for answer in self._answered.get(chat, ()) if answer not in answered]
        if not conversation.memory:
            return _Outcome.DONE
        texts = questions_of(messages, answered)
        if not texts:
            return _Outcome.DONE
        answer = await self._extract(chat, texts)
        if answer is None:
            self._answered[chat] = answered + self._answered.get(chat, [])  # read again next time
            return _Outcome.DISPLACED
        facts = proposed_facts(answer, texts, [*known, *self._asked])
        await self._propose(chat, facts)
        return _Outcome.DONE

    async def _extract(self, chat: int, texts: Sequence[str]) -> str | None:
        """The model's answer, or None when a person's request (or a load) displaced it."""
        session = self._session
        # No saved state: this prompt is asked once, and would only push a chat's own state out of the engine's room.
        request = session.engine.request(extraction_messages(texts), EXTRACTION_SETTINGS, shape=SHAPE,
                                         threads=session.answer_threads(self._settings()), gives_way=True,
                                         keep_state=False)
        parts: list[str] = []
        done: Done | None = None
        self._asking.add(chat)
        try:
            async for event in request.events():
                if isinstance(event, Delta) and not event.thinking:
                    parts.append(event.text)
                elif isinstance(event, Done):
                    done = event
        except EngineError as exc:
            log.info("No memories proposed for chat %s: %s", chat, exc)  # the engine's end is said where heard
            return ""
        finally:
            self._asking.discard(chat)
        if done is None or done.stats.finish_reason == FinishReason.CANCELLED:
            return None
        return "".join(parts)

    async def _propose(self, chat: int, facts: Sequence[str]) -> None:
        automatic = self._settings().memory.propose is MemoryProposal.AUTOMATIC
        for fact in facts:
            self._asked.add(same_fact(fact))
            if not automatic:
                proposal = ProposedMemory(next(self._ids), fact, chat)
                self._pending[proposal.id] = proposal
                self._emit(MemoryProposed(proposal))
                continue
            try:
                added = await self._book.add(fact, MemoryOrigin.PROPOSED, chat)
            except (MemoryRefused, HistoryError) as exc:
                self._emit(Problem(f"Kestrel could not remember “{fact}”: {exc}", "history"))
                return
            if added.new:
                self._emit(MemoryProposed(ProposedMemory(next(self._ids), fact, chat, added.memory)))


def questions_of(messages: Sequence[Message], answers: Sequence[int]) -> list[str]:
    """The person's messages that these answers answered (the last of theirs before each), oldest
    first, each once; an answer no longer in the chat (regenerated, edited away) adds none."""
    wanted = set(answers)
    found: dict[int, str] = {}
    last: Message | None = None
    for message in messages:
        if message.role == Role.USER:
            last = message
        elif message.id in wanted and last is not None and last.text.strip():
            found[last.id] = last.text
    return [found[key] for key in sorted(found)]
