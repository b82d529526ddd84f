"""Memories: short facts the person asked Kestrel to remember, as values that cross every layer, and their bounds."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum

# One memory is one fact in a sentence or two; past this it is refused, not cut (a cut fact
# can say something else). 1,000 characters is about 250 tokens, half the prompt's share.
MAX_MEMORY_CHARS = 1_000
# The most memories kept: far above what a person tells an assistant, and small enough that
# selecting among them stays within a few milliseconds (benchmarks/memory.py).
MAX_MEMORIES = 10_000
# What a refusal quotes of the text it refused.
_QUOTED_CHARS = 40
# C0 controls and DEL (a tab or a line break included) become spaces: a memory is one line of
# the prompt's bulleted list, and a pasted paragraph is kept as one.
_CONTROL = re.compile("[\x00-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class MemoryOrigin(StrEnum):
    """Where a memory came from. The values are written to the history: add members, but never
    rename or reuse a value."""

    HAND = "hand"          # typed on the window's Memory page
    CLI = "cli"            # `kestrel memory add`
    TOOL = "tool"          # the model's remember tool, in a chat, approved by the person
    MESSAGE = "message"    # the Remember action on a message
    PROPOSED = "proposed"  # proposed by Kestrel after a chat and accepted


@dataclass(frozen=True)
class Memory:
    """One remembered fact. `created` is Unix epoch seconds; `conversation_id` the chat it came
    from (None: none, or that chat was deleted since); `enabled` False: kept but not used."""

    id: int
    text: str
    created: float
    origin: MemoryOrigin
    conversation_id: int | None = None
    enabled: bool = True

    def to_dict(self) -> dict[str, object]:
        """As `kestrel memory list --json` writes it."""
        return {"id": self.id, "text": self.text, "created": self.created, "origin": self.origin.value,
                "conversation_id": self.conversation_id, "enabled": self.enabled}


class RefusalReason(StrEnum):
    EMPTY = "empty"
    TOO_LONG = "too_long"
    FULL = "full"


class MemoryRefused(Exception):
    """A memory that cannot be kept: the reason and its facts (each front end may word them its
    own way); str() is the plain words every front end can show as they are. length and beginning:
    TOO_LONG's characters given and the start of them; count: FULL's memories kept now."""

    def __init__(self, reason: RefusalReason, length: int = 0, beginning: str = "", count: int = 0) -> None:
        super().__init__(reason, length, beginning, count)
        self.reason, self.length, self.beginning, self.count = reason, length, beginning, count

    def __str__(self) -> str:
        if self.reason is RefusalReason.EMPTY:
            return "That memory is empty: write the fact to remember, such as \"My daughter is called Ada.\""
        if self.reason is RefusalReason.TOO_LONG:
            return (f"That memory (\"{self.beginning}\") is {self.length:,} characters long; a memory holds at "
                    f"most {MAX_MEMORY_CHARS:,}. Keep one short fact per memory, such as \"I prefer short "
                    "answers.\"")
        return (f"Kestrel already keeps {self.count:,} memories, the most it keeps ({MAX_MEMORIES:,}). Delete "
                "some you no longer need, then add this one again.")


def memory_text(text: str) -> str:
    """The text as a memory keeps it: one line (line breaks, tabs and runs of spaces as one space), a
    lone surrogate (UTF-8 cannot hold it) as U+FFFD. MemoryRefused if nothing is left or it is past
    MAX_MEMORY_CHARS. Control-token look-alikes (`<|im_start|>`) stay as typed: the engine reads every
    message's text as text (app/engine/templates/outside_text.py)."""
    if not isinstance(text, str):
        raise TypeError(f"a memory's text must be a str, not {type(text).__name__}")
    if len(text) > 4 * MAX_MEMORY_CHARS:  # refused before the work below: a 1 MB paste costs nothing
        raise MemoryRefused(RefusalReason.TOO_LONG, len(text), _beginning(text))
    kept = " ".join(_CONTROL.sub(" ", _SURROGATE.sub("\ufffd", text)).split())
    if not kept:
        raise MemoryRefused(RefusalReason.EMPTY)
    if len(kept) > MAX_MEMORY_CHARS:
        raise MemoryRefused(RefusalReason.TOO_LONG, len(kept), _beginning(kept))
    return kept


def _beginning(text: str) -> str:
    head = " ".join(_CONTROL.sub(" ", text[:4 * _QUOTED_CHARS]).split())
    return head if len(head) <= _QUOTED_CHARS else head[:_QUOTED_CHARS - 1].rstrip() + "…"


def memory_ids_json(ids: tuple[int, ...]) -> str:
    """The memories an answer used, as the history's messages.memories column keeps them."""
    return json.dumps(list(ids), separators=(",", ":"))


def memory_ids_from_json(stored: object) -> tuple[int, ...]:
    """An answer's memory ids from the history's column: () where there are none, or where what is
    stored is not such a list (a row another program wrote)."""
    if not isinstance(stored, str) or stored == "[]":
        return ()
    try:
        data = json.loads(stored)
    except (ValueError, RecursionError):
        return ()
    if not isinstance(data, list) or len(data) > MAX_MEMORIES:
        return ()
    return tuple(item for item in data if isinstance(item, int) and not isinstance(item, bool))
