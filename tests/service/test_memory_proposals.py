"""Memories Kestrel proposes after a chat, through the window's doors on the scripted engine: asked of the model in the
background, kept only on the person's yes (or at once when automatic), never when off, and never in a person's way."""

from __future__ import annotations

import dataclasses
import json

from app.core.memories import MemoryOrigin
from app.core.memory_settings import MemoryProposal, MemorySettings
from app.engine import protocol as p
from app.service import events as ev
from app.service.chats.memory.memory_extraction import BEGIN, SCHEMA
from app.service.memory_events import MemoryProposalSettled, MemoryProposed
from tests.helpers.scripted_answers import Script
from tests.service.conftest import run

ADA = "My daughter is called Ada."
FACTS = Script(text=(json.dumps({"facts": [ADA, "What games can we play?"]}),), endless=False)
REPLY = Script(text=("Hello", " there."), endless=False)


def _listening(started) -> None:
    """The window's part: it shows proposals; the waits shortened so the test does not sit through them."""
    proposals = started.service.memory_proposals
    proposals.idle_s, proposals.settle_s = 0.05, 0.01
    started.doors.memory.listen_for_proposals(True)


async def _set(started, **changes: object) -> None:
    settings = started.doors.settings.settings
    await started.doors.settings.update_settings(
        dataclasses.replace(settings, memory=dataclasses.replace(MemorySettings(), **changes)))


def _extractions(engine) -> list[p.Generate]:
    return [r for r in engine.requests if isinstance(r, p.Generate) and r.shape.json_schema == SCHEMA]


async def _chat(started, text: str) -> None:
    assert started.doors.chat.send(text)
    await started.doors.chat.wait_idle()


def test_a_proposal_is_kept_only_once_the_person_accepts_it(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors, events = started.doors, started.events
            _listening(started)
            started.engine.scripts.extend([REPLY, FACTS])
            await _chat(started, ADA)
            await events.until(lambda: events.of(MemoryProposed), what="a proposal")
            [proposed] = events.of(MemoryProposed)
            chat = doors.chat.conversation.id
            assert (proposed.proposal.text, proposed.proposal.conversation_id, proposed.proposal.kept) == (ADA, chat, None)
            assert doors.memory.proposals() == [proposed.proposal], "the question about a game is no fact"
            assert await doors.memory.listing() == [], "nothing is kept before the person's yes"
            [asked] = _extractions(started.engine)
            assert asked.messages[1].content.startswith(f"{BEGIN}\n1. {ADA}\n"), "the person's message, fenced"
            assert asked.settings.temperature == 0.0 and not asked.keep_state, "greedy, and leaves no saved state"

            added = await doors.memory.accept_proposal(proposed.proposal.id)
            [memory] = await doors.memory.listing()
            assert added.memory == memory
            assert (memory.text, memory.origin, memory.conversation_id) == (ADA, MemoryOrigin.PROPOSED, chat)
            assert events.of(MemoryProposalSettled) == [MemoryProposalSettled(proposed.proposal.id, memory)]
            assert doors.memory.proposals() == []

    run(scenario)


def test_not_now_keeps_nothing_and_is_not_asked_again_and_edited_words_are_kept(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors, events = started.doors, started.events
            _listening(started)
            started.engine.scripts.extend([REPLY, FACTS])
            await _chat(started, ADA)
            await events.until(lambda: events.of(MemoryProposed), what="a proposal")
            doors.memory.decline_proposal(events.of(MemoryProposed)[0].proposal.id)
            assert events.of(MemoryProposalSettled)[-1].kept is None and await doors.memory.listing() == []
            started.engine.scripts.extend([REPLY, FACTS, REPLY, Script(text=(json.dumps({"facts": [
                ADA, "I live in Oslo."]}),), endless=False)])
            await _chat(started, "Really, my daughter is called Ada.")
            await events.until(lambda: len(_extractions(started.engine)) == 2, what="a second extraction")
            await _chat(started, "I live in Oslo.")
            await events.until(lambda: len(events.of(MemoryProposed)) == 2, what="the Oslo proposal")
            oslo = events.of(MemoryProposed)[-1].proposal
            assert oslo.text == "I live in Oslo.", "Ada was declined: not proposed again in this run"
            assert _extractions(started.engine)[-1].messages[1].content.count("\n") == 4, "only what is new is read"
            await doors.memory.accept_proposal(oslo.id, "I live in Oslo, Norway.")
            assert [m.text for m in await doors.memory.listing()] == ["I live in Oslo, Norway."]

    run(scenario)


def test_automatic_keeps_it_at_once_and_says_so(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            events = started.events
            await _set(started, propose=MemoryProposal.AUTOMATIC)
            _listening(started)
            started.engine.scripts.extend([REPLY, FACTS])
            await _chat(started, ADA)
            await events.until(lambda: events.of(MemoryProposed), what="the kept fact said")
            [memory] = await started.doors.memory.listing()
            assert events.of(MemoryProposed)[0].proposal.kept == memory and memory.origin is MemoryOrigin.PROPOSED
            assert started.doors.memory.proposals() == []
            assert await started.doors.memory.remove(memory.id), "Undo forgets it as Delete does"

    run(scenario)


def test_nothing_is_asked_of_the_model_when_off_for_a_chat_without_memory_or_with_no_window(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors, engine, events = started.doors, started.engine, started.events
            started.service.memory_proposals.idle_s = 0.0
            await _chat(started, ADA)  # no front end listens (the CLI, the API)
            _listening(started)
            await _set(started, propose=MemoryProposal.OFF)
            await _chat(started, "My son is called Max.")
            await _set(started, enabled=False)
            await _chat(started, "My son is called Max.")
            await _set(started)
            await doors.memory.set_chat_memory(doors.chat.conversation.id, False)
            await _chat(started, "My son is called Max.")
            doors.chat.new_conversation()
            engine.scripts.extend([REPLY, Script(text=(json.dumps({"facts": ["I live in Oslo."]}),), endless=False)])
            await _chat(started, "I live in Oslo.")
            await events.until(lambda: events.of(MemoryProposed), what="the one chat that may propose")
            [asked] = _extractions(engine)
            assert ADA not in asked.messages[1].content and "Max" not in asked.messages[1].content
            assert [e.proposal.text for e in events.of(MemoryProposed)] == ["I live in Oslo."]

    run(scenario)


def test_a_persons_message_displaces_the_request_which_is_asked_again_later(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors, events, engine = started.doors, started.events, started.engine
            _listening(started)
            slow = Script(text=tuple(" " for _ in range(400)) + (json.dumps({"facts": [ADA]}),), endless=False,
                          token_s=0.01)
            engine.scripts.extend([REPLY, slow])
            await _chat(started, ADA)
            await events.until(lambda: len(_extractions(engine)) == 1, what="the extraction to start")
            doors.chat.new_conversation()
            engine.scripts.append(REPLY)  # the person's answer; every extraction after it proposes Ada
            engine.default_script = Script(text=(json.dumps({"facts": [ADA]}),), endless=False)
            await _chat(started, "What is the capital of France?")
            finished = events.of(ev.AnswerFinished)[-1].message
            assert finished.stats.finish_reason.value == "stop", "the person's answer was not held up"
            await events.until(lambda: events.of(MemoryProposed), what="the extraction asked again")
            assert events.of(MemoryProposed)[0].proposal.text == ADA
            asked_ada = [r for r in _extractions(engine) if ADA in r.messages[1].content]
            assert len(asked_ada) >= 2, "the displaced request was asked again"

    run(scenario)


def test_a_temporary_chat_is_never_read(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors, engine, events = started.doors, started.engine, started.events
            _listening(started)
            await doors.chat.new_temporary_conversation()
            engine.scripts.append(REPLY)  # an extraction asked of it would get the default answer, and show below
            await _chat(started, ADA)
            doors.chat.new_conversation()
            engine.scripts.extend([REPLY, Script(text=(json.dumps({"facts": ["I live in Oslo."]}),), endless=False)])
            await _chat(started, "I live in Oslo.")
            await events.until(lambda: events.of(MemoryProposed), what="the saved chat's proposal")
            assert [ADA not in r.messages[1].content for r in _extractions(engine)] == [True]
            assert [e.proposal.text for e in events.of(MemoryProposed)] == ["I live in Oslo."]

    run(scenario)
