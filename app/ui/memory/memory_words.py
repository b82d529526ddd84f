"""Memory in the window's words: when a memory was kept, where it came from, how many there are."""

from __future__ import annotations

from datetime import datetime

from app.core.memories import Memory, MemoryOrigin


def kept_words(created: float) -> str:
    """When a memory was kept, as a date and time people read at a glance: "6 Dec 2026, 18:20"."""
    when = datetime.fromtimestamp(created)
    return f"{when.day} {when:%b %Y, %H:%M}"


def origin_words(memory: Memory, chat_title: str | None) -> str:
    """Where a memory came from, with its chat's title while that chat is kept."""
    chat = f"“{chat_title}”" if chat_title else "a chat"  # none: deleted since, or one the CLI kept in memory
    if memory.origin is MemoryOrigin.HAND:
        return "Added by hand"
    if memory.origin is MemoryOrigin.CLI:
        return "Added with kestrel memory"
    if memory.origin is MemoryOrigin.TOOL:
        return f"Asked in {chat}"
    if memory.origin is MemoryOrigin.MESSAGE:
        return f"From a message in {chat}"
    return f"Proposed in {chat}"


def count_words(count: int) -> str:
    """"1 memory", "3 memories"."""
    return "1 memory" if count == 1 else f"{count:,} memories"
