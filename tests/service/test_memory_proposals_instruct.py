"""A memory proposed after a chat, on the real instruct model (greedy): the fact the person told is proposed, and kept
only once accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.core.memories import MemoryOrigin
from app.service.memory_events import MemoryProposed
from app.service.models.client import EngineClient
from tests.service.conftest import run

pytestmark = [pytest.mark.starter, pytest.mark.slow]


def test_a_told_fact_is_proposed_and_kept_only_once_accepted(started_service, starter_model: Path) -> None:
    settings = GenerationSettings(max_tokens=24, temperature=0.0, context_length=2048)

    async def scenario() -> None:
        async with started_service(settings, model=starter_model, engine=EngineClient()) as started:
            doors, events = started.doors, started.events
            proposals = started.service.memory_proposals
            proposals.idle_s, proposals.settle_s = 0.1, 0.05  # the window waits IDLE_S; the test need not
            doors.memory.listen_for_proposals(True)
            await doors.chat.set_conversation_settings("", settings)
            assert doors.chat.send("My daughter is called Ada.")
            await doors.chat.wait_idle()
            await events.until(lambda: events.of(MemoryProposed), timeout=180, what="a proposal")
            texts = [event.proposal.text for event in events.of(MemoryProposed)]
            assert any("Ada" in text for text in texts), texts
            assert await doors.memory.listing() == [], "nothing is kept before the person's yes"
            ada = next(event.proposal for event in events.of(MemoryProposed) if "Ada" in event.proposal.text)
            await doors.memory.accept_proposal(ada.id)
            [memory] = await doors.memory.listing()
            assert "Ada" in memory.text and memory.origin is MemoryOrigin.PROPOSED
            assert memory.conversation_id == doors.chat.conversation.id

    run(scenario, timeout=400)
