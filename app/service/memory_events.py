"""Memory's events: the person's memories changed (added, edited, turned on or off, forgotten)."""

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
