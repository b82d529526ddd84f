"""Which memories an answer is given: all of them when they fit, else the most relevant to the chat's first message.

Relevance is BM25 over the memories' FTS5 index, with the documents' tokenizer and the documents'
reading of a question into words (app/documents/search.py); what is left of the budget goes to the
newest memories, since a person's recent facts are the likelier to matter. Vectors are not used:
the embedding model runs in the documents' own process, which a chat does not wait for.

The functions named *_on_store run on the storage's writer thread (Storage.history).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.memories import Memory
from app.core.store.history_file import HistoryFile
from app.core.store.memories import best_matches, enabled_count, enabled_memories, newest_memories
from app.documents.chunks import estimate_tokens

# The most prompt tokens the memories take, and at most this share of the context: a small
# model's 2,048 tokens keep most of their room for the chat itself.
MEMORY_TOKENS = 512
CONTEXT_SHARE = 8
# Candidates read from each ranking (relevance, recency) before the budget is filled.
CANDIDATES = 64
SECTION_INTRO = "Things the person asked you to remember:"
_INTRO_TOKENS = estimate_tokens(f"{SECTION_INTRO}\n") + 1  # and the blank line before it


@dataclass(frozen=True)
class Chosen:
    """The memories chosen for an answer (oldest first: the order the prompt lists them in), of
    `enabled` memories that are on; `ranked` True when not all of them fitted."""

    memories: tuple[Memory, ...]
    enabled: int
    ranked: bool = False

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(memory.id for memory in self.memories)


def memory_budget(context_length: int) -> int:
    """The prompt tokens the memories may take in a context of this length."""
    return max(0, min(MEMORY_TOKENS, context_length // CONTEXT_SHARE))


def memory_cost(memory: Memory) -> int:
    """A memory's estimated tokens as a line of the prompt's list."""
    return estimate_tokens(f"- {memory.text}\n")


def choose_on_store(store: HistoryFile, question: str, budget: int) -> Chosen:
    """The memories for an answer whose chat began with `question`, within `budget` tokens.

    Every memory costs at least one token, so when more are on than the budget holds tokens the
    ranking is used without reading them all (the case that has to stay fast at 10,000)."""
    count = enabled_count(store)
    room = budget - _INTRO_TOKENS
    if count == 0 or room <= 0:
        return Chosen((), count)
    if count <= room:
        every = enabled_memories(store)
        if sum(memory_cost(memory) for memory in every) <= room:
            return Chosen(tuple(every), count)
    ranked = ranked_on_store(store, question)
    return Chosen(within(ranked, room), count, ranked=True)


def ranked_on_store(store: HistoryFile, question: str, candidates: int = CANDIDATES) -> list[Memory]:
    """The memories best matching `question` first, then the newest; each once."""
    from app.documents.search import query_words  # numpy comes with it: only when there are many memories

    seen: set[int] = set()
    ranked: list[Memory] = []
    for memory in best_matches(store, query_words(question), candidates) + newest_memories(store, candidates):
        if memory.id not in seen:
            seen.add(memory.id)
            ranked.append(memory)
    return ranked


def within(ranked: Sequence[Memory], room: int) -> tuple[Memory, ...]:
    """The ranked memories taken in turn while they fit `room` tokens (one too long for what is left
    is stepped over, not the end of the list), oldest first."""
    taken: list[Memory] = []
    for memory in ranked:
        cost = memory_cost(memory)
        if cost <= room:
            taken.append(memory)
            room -= cost
    return tuple(sorted(taken, key=lambda memory: memory.id))
