"""Which memories an answer gets: all when they fit, else the relevant ones among 1,000 (a fixed set with expected
picks, tests/fixtures/memory/) within the budget, listed oldest first; and the section's words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.memories import Memory, MemoryOrigin
from app.core.store.history import HistoryStore
from app.core.store.memories import add_memory, set_memory_enabled
from app.service.chats.memory.memory_choice import (MEMORY_TOKENS, choose_on_store, memory_budget, memory_cost,
                                                    ranked_on_store, within)
from app.service.chats.memory.memory_prompt import MemoryUse, memory_section

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory" / "memories.json"
SET = json.loads(FIXTURE.read_text(encoding="utf-8"))
BUDGET = memory_budget(4096)


@pytest.fixture(scope="module")
def thousand(tmp_path_factory: pytest.TempPathFactory):
    store = HistoryStore(tmp_path_factory.mktemp("memories") / "history.sqlite3")
    for text in SET["memories"]:
        add_memory(store, text, MemoryOrigin.CLI)
    yield store
    store.close()


@pytest.fixture
def store(tmp_path: Path):
    with HistoryStore(tmp_path / "history.sqlite3") as opened:
        yield opened


def _texts(memories: tuple[Memory, ...] | list[Memory]) -> list[str]:
    return [memory.text for memory in memories]


@pytest.mark.parametrize("query", SET["queries"], ids=[q["question"] for q in SET["queries"]])
def test_the_relevant_memory_is_ranked_near_the_top_and_chosen_among_1000(thousand, query) -> None:
    ranked = _texts(ranked_on_store(thousand, query["question"]))
    for expected in query["expected"]:
        assert expected in ranked[:3], (query["question"], ranked[:5])
    chosen = choose_on_store(thousand, query["question"], BUDGET)
    assert chosen.ranked and chosen.enabled == 1000
    assert set(query["expected"]) <= set(_texts(chosen.memories))
    assert sum(memory_cost(m) for m in chosen.memories) <= BUDGET
    assert [m.id for m in chosen.memories] == sorted(m.id for m in chosen.memories), "listed oldest first"


def test_a_question_that_matches_nothing_gets_the_newest_memories(thousand) -> None:
    chosen = choose_on_store(thousand, "zzz qqq", BUDGET)
    newest = max(m.id for m in chosen.memories)
    assert newest == 1000 and len(chosen.memories) > 10


def test_few_memories_all_go_whatever_the_question(store: HistoryStore) -> None:
    for text in ("My daughter is called Ada.", "I write Python at work.", "I prefer short answers."):
        add_memory(store, text, MemoryOrigin.HAND)
    set_memory_enabled(store, 2, False)
    chosen = choose_on_store(store, "What is the capital of France?", BUDGET)
    assert not chosen.ranked and chosen.ids == (1, 3) and chosen.enabled == 2
    assert memory_section(chosen.memories) == \
        "Things the person asked you to remember:\n- My daughter is called Ada.\n- I prefer short answers."
    assert choose_on_store(store, "anything", 0).memories == ()


def test_the_budget_is_a_share_of_a_small_context_and_never_past_its_most() -> None:
    assert memory_budget(2048) == 256 and memory_budget(4096) == MEMORY_TOKENS == memory_budget(131072)


def test_one_memory_too_long_for_what_is_left_is_stepped_over() -> None:
    big, small = Memory(1, "x" * 400, 0, MemoryOrigin.CLI), Memory(2, "Short fact.", 0, MemoryOrigin.CLI)
    assert within([big, small], 20) == (small,)


def test_the_section_goes_after_the_chats_own_system_prompt() -> None:
    use = MemoryUse("Things the person asked you to remember:\n- A.", (1,))
    assert use.system_prompt("") == use.section
    assert use.system_prompt("You are terse.\n") == f"You are terse.\n\n{use.section}"
    assert MemoryUse().system_prompt("You are terse.") == "You are terse."
