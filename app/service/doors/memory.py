"""MemoryDoor: the person's memories, for the window's Memory page, Remember action, proposals and "used N memories", and `kestrel memory`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.store.history import HistoryDamaged

if TYPE_CHECKING:
    from app.service.root import Service


class MemoryDoor:
    """The memories and each chat's use of them; MemoriesChanged (app/service/memory_events.py) says
    what changed, whoever changed it (this door, the model's remember tool, another Kestrel).

    listing() every memory, oldest first. add(text, origin, conversation_id=None) -> AddedMemory
    (new False: the same text was kept already). edit(id, text), set_enabled(id, on) -> Memory.
    remove(id) -> bool, clear() -> int: forgotten from the table, the search index, the file and
    every saved chat state. used_by(answer) -> the memories an answer was given that are still kept
    (Message.memories holds their ids). set_chat_memory(conversation_id, on): whether a saved chat's
    answers use memory (Conversation.memory). history_damage: the history file that holds them was
    found damaged (the CLI leaves the choice to the window).

    Proposals after a chat (app/service/chats/memory/memory_proposals.py): listen_for_proposals(on)
    (a front end that shows them is there: none are asked for before), proposals() those waiting,
    accept_proposal(id, text=None) -> AddedMemory (KeyError once answered), decline_proposal(id).
    MemoryProposed and MemoryProposalSettled say what happened to them.

    add and edit raise MemoryRefused (app/core/memories.py: empty, too long, too many; its words
    can be shown as they are); every call raises HistoryError when the disk refuses, and edit,
    set_enabled and set_chat_memory KeyError for an id that is not there.
    """

    def __init__(self, service: Service) -> None:
        self._service = service
        book = service.memory
        self.listing = book.listing
        self.add = book.add
        self.edit = book.edit
        self.set_enabled = book.set_enabled
        self.remove = book.remove
        self.clear = book.clear
        self.used_by = book.used_by
        self.set_chat_memory = book.set_chat_memory
        proposals = service.memory_proposals
        self.listen_for_proposals = proposals.listen
        self.proposals = proposals.pending
        self.accept_proposal = proposals.accept
        self.decline_proposal = proposals.decline

    @property
    def history_damage(self) -> HistoryDamaged | None:
        return self._service.history_damage
