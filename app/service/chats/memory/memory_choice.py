"""Which memories an answer is given: all of them when they fit, else the most relevant to the chat's first message.

Relevance is the documents' hybrid search over the memories (app/documents/search.py): BM25 over their
FTS5 index, with the documents' tokenizer and reading of a question into words, fused by reciprocal rank
with the cosine of the question's vector and the memories' (memory_vectors.py) when the documents'
embedding model is chosen and has made them; BM25 alone otherwise. What is left of the budget goes to the
newest memories, since a person's recent facts are the likelier to matter. The question's vector is made
before, on the documents' worker (MemoryBook), so nothing here waits for the embedding model.

The functions named *_on_store run on the storage's writer thread (Storage.history).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.memories import Memory
from app.core.store.history_file import HistoryFile
from app.core.store.memories import (best_matches, enabled_count, enabled_memories, memories_by_ids,
                                     newest_memories)
from app.documents.chunks import estimate_tokens
from app.service.chats.memory.memory_vectors import MemoryQuery, MemoryVectors

# The most prompt tokens the memories take, and at most this share of the context: a small
# model's 2,048 tokens keep most of their room for the chat itself.
MEMORY_TOKENS = 512
CONTEXT_SHARE = 8
# Candidates read from each ranking (words, meaning, recency) before the budget is filled.
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


def choose_on_store(store: HistoryFile, question: str, budget: int, query: MemoryQuery | None = None,
                    vectors: MemoryVectors | None = None) -> Chosen:
    """The memories for an answer whose chat began with `question`, within `budget` tokens; ranked by
    meaning too when `query` (the question's vector) and `vectors` are given."""
    fitting = fitting_on_store(store, budget)
    return fitting if fitting is not None else ranked_choice_on_store(store, question, budget, query, vectors)


def fitting_on_store(store: HistoryFile, budget: int) -> Chosen | None:
    """Every memory that is on, when they all fit `budget` (none when there is no room); None when they do
    not, and the ranking must choose (ranked_choice_on_store).

    Every memory costs at least one token, so when more are on than the budget holds tokens they are not
    read at all (the case that has to stay fast at 10,000)."""
    count = enabled_count(store)
    room = budget - _INTRO_TOKENS
    if count == 0 or room <= 0:
        return Chosen((), count)
    if count <= room:
        every = enabled_memories(store)
        if sum(memory_cost(memory) for memory in every) <= room:
            return Chosen(tuple(every), count)
    return None


def ranked_choice_on_store(store: HistoryFile, question: str, budget: int, query: MemoryQuery | None = None,
                           vectors: MemoryVectors | None = None) -> Chosen:
    """The best ranked memories that fit `budget` (fitting_on_store said they do not all fit)."""
    ranked = ranked_on_store(store, question, query=query, vectors=vectors)
    return Chosen(within(ranked, budget - _INTRO_TOKENS), enabled_count(store), ranked=True)


def ranked_on_store(store: HistoryFile, question: str, candidates: int = CANDIDATES, *,
                    query: MemoryQuery | None = None, vectors: MemoryVectors | None = None) -> list[Memory]:
    """The memories best matching `question` first (by its words, and by meaning where the memories have
    vectors of the query's model), then the newest; each once."""
    from app.documents.search import fuse, query_words  # numpy comes with it: only when there are many memories

    matches = best_matches(store, query_words(question), candidates)
    nearest = vectors.nearest(store, query, candidates) if query is not None and vectors is not None else []
    if nearest:
        fused = [memory_id for memory_id, _ in fuse([[(m.id, 0.0) for m in matches], nearest], candidates)]
        found = {memory.id: memory for memory in matches}
        found.update((memory.id, memory) for memory in memories_by_ids(store, set(fused) - found.keys())
                     if memory.enabled)
        matches = [found[memory_id] for memory_id in fused if memory_id in found]
    seen: set[int] = set()
    ranked: list[Memory] = []
    for memory in matches + newest_memories(store, candidates):
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
