"""A damaged history file: what the user is told, and carrying out their choice."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from app.core.store.history import HistoryDamaged, HistoryError
from app.core.store.history_repair import Replacement
from app.service.chats.conversations import Conversations
from app.service.events import ActivityChanged, ConversationsListed, DamagedHistoryReplaced, Event, Problem
from app.service.storage import Storage


class HistoryChoice:
    """Replaces a damaged history by a recovered or fresh one, when the user chooses.

    `answers_busy()` says whether an answer is written or waits (then it refuses);
    `show_new()` and `show(id)` are the front end's way to leave and reopen a chat.
    """

    def __init__(self, storage: Callable[[], Storage], emit: Callable[[Event], None], conversations: Conversations,
                 *, answers_busy: Callable[[], bool], open_id: Callable[[], int | None],
                 show_new: Callable[[], None], show: Callable[[int], Awaitable[None]]) -> None:
        self._storage = storage
        self._emit = emit
        self._conversations = conversations
        self._answers_busy = answers_busy
        self._open_id = open_id
        self._show_new = show_new
        self._show = show
        self.replacing = False

    async def replace(self, recover: bool) -> bool:
        """Recover what can be read into a new history (recover) or start a fresh one."""
        storage = self._storage()
        if storage.history_damage is None or self.replacing:
            return False
        if self._answers_busy():
            # Chat ids may change in the new history: an answer being written into one would
            # land in another chat, or nowhere.
            self._emit(Problem("Wait until the answers are finished (or stop them), then choose again.",
                               "history"))
            return False
        self.replacing = True
        open_id = self._open_id()
        was_in_memory = storage.in_memory
        self._show_new()  # its id may not mean the same chat in the new history
        self._emit(ActivityChanged("Recovering your chats…" if recover else "Starting a fresh history…"))
        try:
            done = await storage.replace_damaged_history(recover)
        except HistoryError as exc:
            self._emit(Problem(str(exc), "history"))
            if open_id is not None:
                await self._show(open_id)
            return False
        finally:
            self.replacing = False
            self._emit(ActivityChanged("Idle"))
        await self._conversations.drafts.load()
        conversations = await self._conversations.listing()
        self._emit(ConversationsListed(tuple(conversations)))
        reopen = done.carried.get(open_id) if was_in_memory and open_id is not None else open_id
        if reopen is not None and any(c.id == reopen for c in conversations):
            await self._show(reopen)
        self._emit(DamagedHistoryReplaced(replaced_text(done, recover), done.aside, done.conversations,
                                          done.messages))
        return True


def damage_text(damage: HistoryDamaged, in_memory: bool) -> str:
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


def replaced_text(done: Replacement, recover: bool) -> str:
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
