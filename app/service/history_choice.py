"""A damaged history file: what the user is told, and carrying out their choice."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.history import HistoryDamaged, HistoryError, HistoryStore
from app.core.history_repair import Replacement
from app.service.events import ActivityChanged, ConversationsListed, DamagedHistoryReplaced, Problem

if TYPE_CHECKING:
    from app.service.controller import ChatController


class HistoryChoice:
    """Replaces a damaged history by a recovered or fresh one, when the user chooses."""

    def __init__(self, controller: ChatController) -> None:
        self._controller = controller
        self.replacing = False

    async def replace(self, recover: bool) -> bool:
        """Recover what can be read into a new history (recover) or start a fresh one."""
        controller = self._controller
        storage = controller._storage()
        if storage.history_damage is None or self.replacing:
            return False
        if not controller.answers.queue.idle:
            # Chat ids may change in the new history: an answer being written into one would
            # land in another chat, or nowhere.
            controller._emit(Problem("Wait until the answers are finished (or stop them), then choose again.",
                                     "history"))
            return False
        self.replacing = True
        open_id = controller.conversation.id if controller.conversation is not None else None
        was_in_memory = storage.in_memory
        controller.new_conversation()  # its id may not mean the same chat in the new history
        controller._emit(ActivityChanged("Recovering your chats…" if recover else "Starting a fresh history…"))
        try:
            done = await storage.replace_damaged_history(recover)
        except HistoryError as exc:
            controller._emit(Problem(str(exc), "history"))
            if open_id is not None:
                await controller.open_conversation(open_id)
            return False
        finally:
            self.replacing = False
            controller._emit(ActivityChanged("Idle"))
        await controller.drafts.load()
        conversations = await controller._history_or_problem(HistoryStore.list_conversations) or []
        controller._emit(ConversationsListed(tuple(conversations)))
        reopen = done.carried.get(open_id) if was_in_memory and open_id is not None else open_id
        if reopen is not None and any(c.id == reopen for c in conversations):
            await controller.open_conversation(reopen)
        controller._emit(DamagedHistoryReplaced(replaced_text(done, recover), done.aside, done.conversations,
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
