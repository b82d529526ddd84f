"""Memory in the window's words: when a memory was kept, where it came from, how many there are, and a proposal said back."""

from __future__ import annotations

import re
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


# A fact is kept in the person's words ("My daughter is called Ada."); Kestrel asks about it in its own
# ("Remember that your daughter is called Ada?"). Word for word: a fact without these words is quoted.
_YOURS = {"i": "you", "me": "you", "my": "your", "mine": "yours", "myself": "yourself", "i'm": "you're",
          "i've": "you've", "i'd": "you'd", "i'll": "you'll", "am": "are", "was": "were", "we": "you",
          "us": "you", "our": "your", "ours": "yours", "ourselves": "yourselves", "we're": "you're"}
_FIRST_PERSON = frozenset(("i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll", "we", "us", "our",
                           "ours", "ourselves", "we're"))
_WORD = re.compile(r"[A-Za-z']+")


def said_to_you(fact: str) -> str | None:
    """The fact as Kestrel says it back to the person ("your daughter is called Ada"), without its end
    punctuation; None when it is not in the first person (it is then quoted as it is)."""
    words = _WORD.findall(fact.casefold())
    if not _FIRST_PERSON.intersection(words):
        return None
    after_subject = {"am", "was"}  # "am" and "was" change only after "I": "I was" -> "you were"
    previous = ""

    def swap(match: re.Match[str]) -> str:
        nonlocal previous
        word = match.group(0)
        lower = word.casefold()
        turned = _YOURS.get(lower) if lower not in after_subject or previous == "i" else None
        previous = lower
        return turned if turned is not None else word

    return _WORD.sub(swap, fact).rstrip(" .!")  # a swapped word is lower case; a name keeps its capital


def proposal_question(fact: str) -> str:
    """"Remember that your daughter is called Ada?"."""
    said = said_to_you(fact)
    return f"Remember that {said}?" if said is not None else f"Remember “{fact}”?"


def kept_notice(fact: str) -> str:
    """What automatic proposals say once kept: "Kestrel will remember that your daughter is called Ada."."""
    said = said_to_you(fact)
    return f"Kestrel will remember that {said}." if said is not None else f"Kestrel will remember “{fact}”."
