"""Memory in answers through the window's doors: the section in the system prompt, the ids kept on the answer,
off in the settings or for one chat, the remember tool approved like any tool, forgetting, and the API."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.conversation import Role, ToolResultPart
from app.core.memories import MemoryOrigin
from app.core.memory_settings import MemoryProposal, MemorySettings
from app.engine import protocol as p
from app.engine.backends.llama.kv_state import SUFFIX
from app.engine.protocol import ChatMessage
from app.service import events as ev
from app.service.api.api_answers import ApiAsk
from app.service.models import kv_cache
from app.service.tools.tool_use import ToolDecision
from tests.helpers.scripted_answers import Script
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.helpers.tool_call_gguf import QWEN3_TEMPLATE
from tests.service.conftest import run, stored

SECTION = "Things the person asked you to remember:\n- My daughter is called Ada.\n- I write Python at work."
REMEMBER_ADA = ("remember", json.dumps({"fact": "My daughter is called Ada."}))


@pytest.fixture
def qwen(tmp_path: Path) -> Path:
    """A tiny model whose (Qwen3) template takes tools; the scripted engine answers for it."""
    return build_tiny_gguf(tmp_path / "qwen.gguf", chat_template=QWEN3_TEMPLATE.read_text(encoding="utf-8"))


def _generated(engine) -> list[p.Generate]:
    return [request for request in engine.requests if isinstance(request, p.Generate)]


async def _remember_two(started) -> tuple[int, int]:
    ada = await started.doors.memory.add("My daughter is called Ada.", MemoryOrigin.HAND)
    work = await started.doors.memory.add("I write Python at work.", MemoryOrigin.HAND)
    return ada.memory.id, work.memory.id


async def _memory_settings(started, **changes: object) -> None:
    settings = started.doors.settings.settings
    await started.doors.settings.update_settings(
        dataclasses.replace(settings, memory=dataclasses.replace(MemorySettings(), **changes)))


def test_a_new_chat_is_given_the_memories_after_its_system_prompt_and_keeps_their_ids(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors = started.doors
            ids = await _remember_two(started)
            assert [e.changed[0].text for e in started.events.of(ev.MemoriesChanged)] == \
                ["My daughter is called Ada.", "I write Python at work."]
            for question in ("What is my daughter's name?", "Something else entirely"):
                doors.chat.new_conversation()
                assert doors.chat.send(question)
                await doors.chat.wait_idle()
            first, second = _generated(started.engine)[-2:]
            assert first.messages[0] == ChatMessage(Role.SYSTEM, SECTION)
            assert second.messages[0] == first.messages[0], "the same memories read the same: saved states match"
            answer = (await stored(started.service, doors.chat.conversation.id))[-1]
            assert answer.memories == ids
            assert started.events.of(ev.AnswerFinished)[-1].message.memories == ids
            assert [m.text for m in await doors.memory.used_by(answer)] == \
                ["My daughter is called Ada.", "I write Python at work."]

    run(scenario)


def test_memory_off_in_the_settings_or_for_one_chat_gives_none(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors = started.doors
            await _remember_two(started)
            assert doors.chat.send("What is my daughter's name?")
            await doors.chat.wait_idle()
            chat = doors.chat.conversation
            await doors.memory.set_chat_memory(chat.id, False)
            assert doors.chat.send("And her age?")
            await doors.chat.wait_idle()
            on, off_for_chat = _generated(started.engine)[-2:]
            assert on.messages[0].content == SECTION
            assert all("Ada" not in message.content for message in off_for_chat.messages)
            doors.chat.new_conversation()
            await _memory_settings(started, enabled=False)
            assert doors.chat.send("What is my daughter's name?")
            await doors.chat.wait_idle()
            off = _generated(started.engine)[-1]
            assert [m.role for m in off.messages] == [Role.USER]
            assert (await stored(started.service, doors.chat.conversation.id))[-1].memories == ()

    run(scenario)


def test_the_remember_tool_keeps_a_fact_only_once_the_person_approves_it(started_service, qwen) -> None:
    async def scenario() -> None:
        async with started_service(model=qwen) as started:
            doors, engine = started.doors, started.engine
            asked: list[ev.ToolApprovalAsked] = []
            decisions = [ToolDecision.DENY, ToolDecision.ALLOW_ONCE]

            def approve(event: ev.Event) -> None:
                if isinstance(event, ev.ToolApprovalAsked):
                    asked.append(event)
                    started.service.tools.answer(event.approval_id, decisions.pop(0))
            started.service.subscribe(approve)
            for _ in range(2):
                engine.scripts.extend([Script(text=("Sure.",), calls=(REMEMBER_ADA,), endless=False),
                                       Script(text=("Done.",), endless=False)])
                doors.chat.new_conversation()
                assert doors.chat.send("Please remember that my daughter is called Ada.")
                await doors.chat.wait_idle()
            denied, allowed = asked
            assert (denied.server, denied.tool, denied.summary) == \
                ("kestrel", "remember", 'Remember "My daughter is called Ada."')
            [memory] = await doors.memory.listing()
            assert (memory.text, memory.origin, memory.conversation_id) == \
                ("My daughter is called Ada.", MemoryOrigin.TOOL, doors.chat.conversation.id)
            result = (await stored(started.service, doors.chat.conversation.id))[-1].parts[2]
            assert isinstance(result, ToolResultPart) and result.text == "Remembered: My daughter is called Ada."
            offered = json.loads(_generated(engine)[-2].shape.tools)
            assert [tool["function"]["name"] for tool in offered] == ["remember"]

            doors.chat.new_conversation()
            assert doors.chat.send("What is the capital of France?")
            await doors.chat.wait_idle()
            assert _generated(engine)[-1].shape.tools is None, "a question that asks to remember nothing is offered no tool"

    run(scenario)


def test_no_remember_tool_while_proposing_is_off(started_service, qwen) -> None:
    async def scenario() -> None:
        async with started_service(model=qwen) as started:
            await _memory_settings(started, propose=MemoryProposal.OFF)
            assert started.doors.chat.send("Remember that I write Python at work.")
            await started.doors.chat.wait_idle()
            assert _generated(started.engine)[-1].shape.tools is None

    run(scenario)


def test_a_model_without_tool_use_answers_a_question_that_asks_to_remember(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:  # the tiny model's template takes no tools
            assert started.doors.chat.send("Please remember that my daughter is called Ada.")
            await started.doors.chat.wait_idle()
            assert _generated(started.engine)[-1].shape.tools is None, "no tool is offered to a model that cannot call one"
            answer = (await stored(started.service, started.doors.chat.conversation.id))[-1]
            assert answer.role == Role.ASSISTANT and answer.text and not started.events.of(ev.Problem)

    run(scenario)


def test_forgetting_leaves_no_saved_state_and_no_later_answer_holding_it(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors = started.doors
            ada, work = await _remember_two(started)
            folder = kv_cache.states_folder()
            folder.mkdir(parents=True, exist_ok=True)
            state = folder / f"model-0123456789abcdef{SUFFIX}"
            state.write_bytes(b"a saved prompt that held the memory")
            assert await doors.memory.remove(ada)
            assert not state.exists(), "every saved chat state is dropped: none can be matched to its text"
            assert started.events.of(ev.MemoriesChanged)[-1] == ev.MemoriesChanged(removed=(ada,))
            assert not await doors.memory.remove(ada)
            assert doors.chat.send("What is my daughter's name?")
            await doors.chat.wait_idle()
            assert _generated(started.engine)[-1].messages[0].content == \
                "Things the person asked you to remember:\n- I write Python at work."
            assert await doors.memory.clear() == 1 and await doors.memory.listing() == []
            assert started.events.of(ev.MemoriesChanged)[-1].everything

    run(scenario)


def test_the_api_uses_memory_only_when_the_setting_says_so(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            await _remember_two(started)
            ask = ApiAsk(endpoint="/v1/chat/completions", client="127.0.0.1:5000", model=None,
                         messages=(ChatMessage("system", "Be brief."), ChatMessage("user", "Who is Ada?")))
            [_ async for _ in started.service.api.answer(ask)]
            assert _generated(started.engine)[-1].messages[0].content == "Be brief."
            await _memory_settings(started, api_uses_memory=True)
            [_ async for _ in started.service.api.answer(ask)]
            assert _generated(started.engine)[-1].messages[0].content == f"Be brief.\n\n{SECTION}"

    run(scenario)


def test_a_memory_forgotten_by_another_kestrel_drops_this_ones_saved_states(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            ada, _ = await _remember_two(started)
            engine, events = started.engine, started.events
            told_before = engine.states_forgotten
            await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "app", "memory", "remove", str(ada)],
                                    cwd=Path(__file__).resolve().parents[2], check=True, capture_output=True,
                                    timeout=60)
            await events.until(lambda: any(e.everything for e in events.of(ev.MemoriesChanged)), timeout=10,
                               what="the forget heard")
            # The other Kestrel cleared the folder; this one's engine holds copies of its states in RAM,
            # which it would write again: it is told to drop them.
            await events.until(lambda: engine.states_forgotten > told_before, timeout=10,
                               what="this Kestrel's engine told to drop its states")
            assert [m.text for m in await started.doors.memory.listing()] == ["I write Python at work."]

    run(scenario)
