"""MemoryBook: the person's memories for every front end, each answer's share of them, and forgetting that holds."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from app.core.conversation import Conversation, Message, Role
from app.core.memories import Memory, MemoryOrigin
from app.core.settings import Settings
from app.core.store.history import HistoryError, HistoryStore
from app.core.store.memories import (AddedMemory, add_memory, edit_memory, keep_memory_vectors, list_memories,
                                     memories_by_ids, memories_lacking_vectors, memory_ids, remove_memories,
                                     set_chat_memory, set_memory_enabled)
from app.engine.protocol import ChatMessage
from app.service.chats.memory.memory_choice import fitting_on_store, memory_budget, ranked_choice_on_store
from app.service.chats.memory.memory_prompt import NO_MEMORY, MemoryUse, memory_section
from app.service.chats.memory.memory_vectors import MemoryQuery, MemoryVectors, vector_bytes
from app.service.events import ConversationChanged, Event, HistoryChangedElsewhere, Problem
from app.service.memory_events import MemoriesChanged
from app.service.models.engine_errors import EngineError
from app.service.storage import Storage

if TYPE_CHECKING:
    from app.service.chats.memory.memory_vectors import EmbedTexts

StorageOf = Callable[[], "Storage | None"]
log = logging.getLogger(__name__)
# How long an answer waits for its question's vector: the embedding model may be busy with a batch of
# the documents or broken, and an answer is never held back for it (BM25 alone chooses then).
QUESTION_WAIT_S = 2.0
# Questions' vectors kept (a chat's answers all ask with its first message), and for how long: the
# documents' model may be changed meanwhile, and a vector of the old one finds nothing once replaced.
QUESTIONS_KEPT = 16
QUESTION_KEPT_S = 600.0
# Memories embedded at a time when their vectors are made (the embedding process takes 16 a request).
FILL_BATCH = 16
# While an answer is written or the documents' indexing waits (battery, paused), vectors wait too:
# looked at this often, for at most this long, then left to the next answer or memory added.
QUIET_POLL_S = 1.0
QUIET_WAIT_S = 600.0


class MemoryBook:
    """The memories, kept in the history file (app/core/store/memories.py) and read on its writer
    thread; MemoriesChanged says what changed.

    `memories()` is the storage that holds them: the history's own, or (the CLI's chat, whose
    history lives in memory) the history file opened beside it; None while there is none.
    `chats()` is the chats' storage, where the per-chat switch and an answer's used ids live.
    Forgetting (remove, clear, edit) also drops every saved chat state (`forget_states`: the
    engine's RAM copies and the files): a state is keyed by its tokens, not by the memories in
    them, so those that hold the forgotten text cannot be told apart from the rest.

    Methods that change memories raise MemoryRefused (the person's input: said as it is) and
    HistoryError (the disk); each front end says them its own way.

    `embed` is the documents' embedding model (DocumentsService.embed_for_memory; None: there is none):
    with it, when not every memory fits an answer, the question's vector joins BM25 in choosing, and the
    memories' vectors are made in the background, FILL_BATCH at a time, while `quiet()` (no answer is
    written, the documents' indexing does not wait) — never on an answer's path.
    """

    def __init__(self, memories: StorageOf, chats: StorageOf, emit: Callable[[Event], None],
                 settings: Callable[[], Settings], forget_states: Callable[[], Awaitable[None]],
                 spawn: Callable[[Coroutine[Any, Any, None]], object], *, embed: EmbedTexts | None = None,
                 quiet: Callable[[], bool] = lambda: True) -> None:
        self._memories, self._chats = memories, chats
        self._emit, self._settings, self._forget_states, self._spawn = emit, settings, forget_states, spawn
        self._embed, self._quiet = embed, quiet
        self._known: frozenset[int] | None = None  # the ids last read: one gone elsewhere means a forget
        self._told_unreadable = False
        self._vectors = MemoryVectors()
        self._asked: OrderedDict[str, tuple[float, MemoryQuery]] = OrderedDict()
        self._ranking = False  # the last answer's memories were ranked: vectors are worth making
        self._filling = False

    def _storage(self) -> Storage:
        storage = self._memories()
        if storage is None:
            raise HistoryError("Your memories are not available: the chat history they are kept in could not "
                               "be opened.")
        return storage

    # --- the list -------------------------------------------------------------------------

    async def load(self) -> None:
        """Note which memories there are (at start-up), so one forgotten by another Kestrel is noticed."""
        storage = self._memories()
        if storage is not None:
            try:
                self._known = await storage.history(memory_ids)
            except HistoryError:
                self._known = None

    async def listing(self) -> list[Memory]:
        """Every memory, on or off, oldest first."""
        memories = await self._storage().history(list_memories)
        self._known = frozenset(memory.id for memory in memories)
        return memories

    async def add(self, text: str, origin: MemoryOrigin, conversation_id: int | None = None) -> AddedMemory:
        """Keep a memory; the same text kept already gives that one back (AddedMemory.new False).
        conversation_id: the chat it came from (dropped where the chat is not in the same file)."""
        storage = self._storage()
        if storage is not self._chats():
            conversation_id = None
        added = await storage.history(add_memory, text, origin, conversation_id)
        if added.new:
            self._known = (self._known or frozenset()) | {added.memory.id}
            self._emit(MemoriesChanged(changed=(added.memory,)))
            self._fill_soon()
        return added

    async def edit(self, memory_id: int, text: str) -> Memory:
        """New words for a memory; its old words are forgotten as a removed memory's are. KeyError if none."""
        memory = await self._storage().history(edit_memory, memory_id, text)  # its vector goes with the old words
        self._vectors.forget()
        self._emit(MemoriesChanged(changed=(memory,)))
        self._fill_soon()
        await self._forget_saved_states()
        return memory

    async def set_enabled(self, memory_id: int, enabled: bool) -> Memory:
        """Turn a memory off (kept, not used in answers) or on again; KeyError if there is none."""
        memory = await self._storage().history(set_memory_enabled, memory_id, enabled)
        self._emit(MemoriesChanged(changed=(memory,)))
        return memory

    async def remove(self, memory_id: int) -> bool:
        """Forget a memory: from the table, the search index, the file and the saved chat states.
        False if there was none with this id."""
        return bool(await self._forget([memory_id]))

    async def clear(self) -> int:
        """Forget every memory; how many there were."""
        return len(await self._forget(None))

    async def _forget(self, ids: Sequence[int] | None) -> list[int]:
        gone = await self._storage().history(remove_memories, ids)  # their vectors with them
        if gone:
            self._vectors.forget()
            self._known = (self._known or frozenset()) - set(gone)
            self._emit(MemoriesChanged(removed=tuple(gone), everything=ids is None))
            await self._forget_saved_states()
        return gone

    async def _forget_saved_states(self) -> None:
        try:
            await self._forget_states()
        except (EngineError, OSError) as exc:
            self._emit(Problem(f"The memory is forgotten, but Kestrel could not clear the saved chat states that "
                               f"may still hold it ({exc}). Clear them in Settings → Performance.", "other"))

    async def used_by(self, answer: Message) -> list[Memory]:
        """The memories an answer was given that are still kept (a forgotten one is not shown again)."""
        if not answer.memories:
            return []
        return await self._storage().history(memories_by_ids, answer.memories)

    async def set_chat_memory(self, conversation_id: int, on: bool) -> None:
        """Whether this saved chat's answers use memory; KeyError if there is no such chat. The chat is
        said changed (ConversationChanged, in its place), so the open chat and its settings follow."""
        chats = self._chats()
        if chats is None:
            raise HistoryError("The chat history is not open.")

        def write(store: HistoryStore) -> Conversation:
            set_chat_memory(store, conversation_id, on)
            return store.get_conversation(conversation_id)

        self._emit(ConversationChanged(await chats.history(write), to_top=False))

    # --- each answer's share ------------------------------------------------------------------

    async def for_answer(self, conversation: Conversation, history: Sequence[Message]) -> MemoryUse:
        """The memories for the chat's next answer, chosen by its first message (so each of its
        answers gets the same ones while the memories stay as they are); none when memory is off
        in the settings or for this chat."""
        if not (self._settings().memory.enabled and conversation.memory):
            return NO_MEMORY
        first = next((message.text for message in history if message.role == Role.USER), "")
        return await self._use(first, conversation.settings.context_length)

    async def for_api(self, messages: Sequence[ChatMessage], context_length: int) -> tuple[ChatMessage, ...]:
        """An API request's messages with the memories in its system message, when the settings let the
        API use memory (memory.api_uses_memory); as they are otherwise."""
        memory = self._settings().memory
        if not (memory.enabled and memory.api_uses_memory):
            return tuple(messages)
        first = next((message.content for message in messages if message.role == Role.USER), "")
        return (await self._use(first, context_length)).messages(messages)

    async def _use(self, question: str, context_length: int) -> MemoryUse:
        storage = self._memories()
        if storage is None:
            return NO_MEMORY
        budget = memory_budget(context_length)
        try:
            chosen = await storage.history(fitting_on_store, budget)
            self._ranking = chosen is None
            if chosen is None:  # too many to give them all: ranked, by meaning too once there are vectors
                query = await self._question(question)
                chosen = await storage.history(ranked_choice_on_store, question, budget, query, self._vectors)
                self._fill_soon()
        except HistoryError as exc:
            if not self._told_unreadable:  # said once: the answers go on without memories meanwhile
                self._told_unreadable = True
                self._emit(Problem(f"Your memories could not be read, so answers go without them: {exc}", "history"))
            return NO_MEMORY
        self._told_unreadable = False
        return MemoryUse(memory_section(chosen.memories), chosen.ids)

    # --- choosing by meaning: the documents' embedding model ------------------------------------

    async def _question(self, question: str) -> MemoryQuery | None:
        """The question's vector, made on the documents' worker within QUESTION_WAIT_S; None without an
        embedding model, or when it was slow or failed (logged: the answer goes on with BM25 alone)."""
        if self._embed is None or not question.strip():
            return None
        kept = self._asked.get(question)
        if kept is not None and time.monotonic() - kept[0] < QUESTION_KEPT_S:
            return kept[1]
        try:
            made = await asyncio.wait_for(self._embed([question]), QUESTION_WAIT_S)
        except TimeoutError:
            log.info("The embedding model gave no vector within %g s: memories chosen by their words", QUESTION_WAIT_S)
            return None
        except Exception:  # noqa: BLE001 - a broken model never holds an answer back
            log.warning("The embedding model failed on a question: memories chosen by their words", exc_info=True)
            return None
        if made is None or len(made[1]) != 1:
            return None
        query = MemoryQuery(made[0], made[1][0])
        self._asked[question] = (time.monotonic(), query)
        self._asked.move_to_end(question)
        while len(self._asked) > QUESTIONS_KEPT:
            self._asked.popitem(last=False)
        return query

    def _fill_soon(self) -> None:
        """Make the vectors the memories lack for the documents' embedding model, in the background (one run
        at a time), once answers rank them: while every memory fits, no model process is started for them."""
        if self._embed is not None and self._ranking and not self._filling:
            self._filling = True
            self._spawn(self._fill())

    async def _fill(self) -> None:
        assert self._embed is not None
        try:
            while await self._until_quiet() and (storage := self._memories()) is not None:
                which = await self._embed([])  # the model in use, without a text
                if which is None:
                    return
                model = which[0]
                lacking = await storage.history(memories_lacking_vectors, model, FILL_BATCH)
                if not lacking:
                    return
                made = await self._embed([memory.text for memory in lacking])
                if made is None or made[0] != model or len(made[1]) != len(lacking):
                    return  # failed (the documents said it), or another model was chosen meanwhile
                vectors = [(memory.id, memory.text, vector_bytes(row)) for memory, row in zip(lacking, made[1])]
                if not await storage.history(keep_memory_vectors, model, vectors):
                    return  # each edited or forgotten meanwhile: the next run starts afresh
        except HistoryError as exc:
            log.info("Memory vectors not kept: %s", exc)
        finally:
            self._filling = False

    async def _until_quiet(self) -> bool:
        """Wait while an answer is written or indexing waits; False if that lasts past QUIET_WAIT_S."""
        waited = 0.0
        while not self._quiet():
            if waited >= QUIET_WAIT_S:
                return False
            await asyncio.sleep(QUIET_POLL_S)
            waited += QUIET_POLL_S
        return True

    # --- another Kestrel changed them ---------------------------------------------------------

    def hear(self, event: Event) -> None:
        """On HistoryChangedElsewhere: read the ids again; a memory gone means another Kestrel forgot
        it, and this one's saved states (its engine's RAM copies) are dropped too."""
        if isinstance(event, HistoryChangedElsewhere):
            self._spawn(self._changed_elsewhere())

    async def _changed_elsewhere(self) -> None:
        storage = self._memories()
        if storage is None:
            return
        try:
            ids = await storage.history(memory_ids)
        except HistoryError:
            return
        known, self._known = self._known, ids
        if known is None or ids == known:
            return
        self._emit(MemoriesChanged(everything=True))
        if known - ids:
            await self._forget_saved_states()
