"""Memory's events: the person's memories changed (added, edited, turned on or off, forgotten), and Kestrel proposes one."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.memories import Memory


@dataclass(frozen=True)
class MemoriesChanged:
    """The memories changed: `changed` were added, edited or turned on or off (as they are now),
    `removed` (their ids) were forgotten. `everything`: the list may differ in any way (cleared,
    or another Kestrel changed it): read it again (MemoryDoor.listing)."""

    changed: tuple[Memory, ...] = ()
    removed: tuple[int, ...] = ()
    everything: bool = False


@dataclass(frozen=True)
class ProposedMemory:
    """A fact Kestrel proposes to remember, read by the model from the person's messages in a chat
    (app/service/chats/memory/memory_proposals.py). `id` counts proposals in this run; `kept`: the memory
    it became at once (memory.propose "automatic": a front end offers Undo), None while it waits for the
    person's yes."""

    id: int
    text: str
    conversation_id: int
    kept: Memory | None = None


@dataclass(frozen=True)
class MemoryProposed:
    """Kestrel proposes to remember a fact (or, automatic, kept it and says so)."""

    proposal: ProposedMemory


@dataclass(frozen=True)
class MemoryProposalSettled:
    """A proposal was answered: `kept` the memory the person's yes kept, None for "Not now"."""

    proposal_id: int
    kept: Memory | None = None
