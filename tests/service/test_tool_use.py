"""Chats that use tools: offered through the template, each call approved, run on a real MCP server, answered."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from app.core.answer_stats import FinishReason
from app.core.conversation import Message, MessageState, Role, TextPart, ToolCallPart, ToolResultPart
from app.core.paths import data_paths
from app.service import events as ev
from app.service.chats.answer_run import chat_of
from app.service.tools.tool_use import DENIED, ToolDecision
from app.tools.mcp_config import McpServerConfig, write_mcp_config
from tests.helpers.scripted_answers import Script
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.helpers.tool_call_gguf import QWEN3_TEMPLATE
from tests.service.conftest import SMALL, run, stored

PARIS = ("get_current_time", '{"timezone":"Europe/Paris"}')


@pytest.fixture
def qwen(tmp_path: Path) -> Path:
    """A tiny model whose (Qwen3) template takes tools; the scripted engine answers for it."""
    return build_tiny_gguf(tmp_path / "qwen.gguf", chat_template=QWEN3_TEMPLATE.read_text(encoding="utf-8"))


@pytest.fixture
def time_server() -> None:
    """The real mcp-server-time (PyPI) in this home's mcp.json, as a user would add it."""
    paths = data_paths().ensure()
    write_mcp_config(paths.mcp_file, [McpServerConfig(
        "time", command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC"))])


async def _chat_with_tools(started, servers: tuple[str, ...] = ("time",)) -> None:
    system, settings = started.doors.chat.conversation_settings()
    assert await started.doors.chat.set_conversation_settings(system, dataclasses.replace(settings, tools=servers))


def _answer_each(started, decision: ToolDecision, asked: list[ev.ToolApprovalAsked]) -> None:
    def heard(event: ev.Event) -> None:
        if isinstance(event, ev.ToolApprovalAsked):
            asked.append(event)
            started.service.tools.answer(event.approval_id, decision)
    started.service.subscribe(heard)


def test_a_call_is_approved_run_on_the_real_server_and_answered(started_service, qwen, time_server) -> None:
    async def scenario() -> None:
        async with started_service(model=qwen) as started:
            service, doors, engine = started.service, started.doors, started.engine
            await _chat_with_tools(started)
            engine.scripts.extend([Script(text=("Let", " me", " check."), calls=(PARIS,), endless=False),
                                   Script(text=("It", " is", " evening", " there."), endless=False)])
            asked: list[ev.ToolApprovalAsked] = []
            _answer_each(started, ToolDecision.ALLOW_ONCE, asked)
            assert doors.chat.send("What time is it in Paris?")
            await doors.chat.wait_idle()
            [approval] = asked
            assert (approval.server, approval.tool) == ("time", "get_current_time")
            assert json.loads(approval.arguments) == {"timezone": "Europe/Paris"}
            answer = (await stored(service, doors.chat.conversation.id))[-1]
            assert answer.state == MessageState.COMPLETE and answer.text == "Let me check.\n\nIt is evening there."
            text, call, result, after = answer.parts
            assert text == TextPart("Let me check.") and after == TextPart("It is evening there.")
            assert isinstance(call, ToolCallPart) and (call.server, call.name) == ("time", "get_current_time")
            assert isinstance(result, ToolResultPart) and result.call_id == call.call_id and not result.is_error
            assert json.loads(result.text)["timezone"] == "Europe/Paris"  # the real server's answer
            first, second = [r for r in engine.requests if hasattr(r, "shape")][-2:]
            offered = {tool["function"]["name"] for tool in json.loads(first.shape.tools)}
            assert offered == {"get_current_time", "convert_time"} and first.shape.tool_choice == "auto"
            replay = second.messages[-2:]
            assert replay[0].role == Role.ASSISTANT and replay[0].tool_calls[0].id == call.call_id
            assert replay[1].role == Role.TOOL and replay[1].tool_call_id == call.call_id
            assert replay[1].content == result.text
            shown = started.events.of(ev.ToolPartsChanged)
            assert [len(e.parts) for e in shown] == [2, 3], "the call shown before its result"
            assert started.events.of(ev.ToolApprovalSettled)[-1].approval_id == approval.approval_id

    run(scenario)


def test_deny_tells_the_model_and_always_stops_asking(started_service, qwen, time_server) -> None:
    async def scenario() -> None:
        async with started_service(model=qwen) as started:
            service, doors, engine = started.service, started.doors, started.engine
            await _chat_with_tools(started)
            asked: list[ev.ToolApprovalAsked] = []
            decision = {"now": ToolDecision.DENY}

            def heard(event: ev.Event) -> None:
                if isinstance(event, ev.ToolApprovalAsked):
                    asked.append(event)
                    service.tools.answer(event.approval_id, decision["now"])
            service.subscribe(heard)
            for answer_with in (ToolDecision.DENY, ToolDecision.ALWAYS, ToolDecision.DENY):
                decision["now"] = answer_with
                engine.scripts.extend([Script(text=(), calls=(PARIS,), endless=False),
                                       Script(text=("Done.",), endless=False)])
                assert doors.chat.send("Time?")
                await doors.chat.wait_idle()
            denied, always, unasked = [m for m in await stored(service,
                                                               doors.chat.conversation.id) if m.role == Role.ASSISTANT]
            assert denied.parts[1] == ToolResultPart(denied.parts[0].call_id, DENIED, denied=True)
            assert not always.parts[1].denied and "Europe/Paris" in always.parts[1].text
            assert not unasked.parts[1].denied, "always allowed: the third call was not asked"
            assert len(asked) == 2 and service.tools.choices.is_always_allowed("time", "get_current_time")

    run(scenario)


def test_stopping_while_a_call_waits_for_approval_keeps_the_call_and_withdraws_the_question(
        started_service, qwen, time_server) -> None:
    async def scenario() -> None:
        async with started_service(model=qwen) as started:
            service, doors, engine = started.service, started.doors, started.engine
            await _chat_with_tools(started)
            engine.scripts.append(Script(text=("Checking.",), calls=(PARIS,), endless=False))
            assert doors.chat.send("Time?")
            await started.events.until(lambda: started.events.of(ev.ToolApprovalAsked), what="the question")
            doors.chat.stop()
            await doors.chat.wait_idle()
            answer = (await stored(service, doors.chat.conversation.id))[-1]
            assert answer.stats.finish_reason == FinishReason.CANCELLED and answer.text == "Checking."
            assert [type(p) for p in answer.parts] == [TextPart, ToolCallPart]
            asked = started.events.of(ev.ToolApprovalAsked)[-1]
            assert started.events.of(ev.ToolApprovalSettled)[-1].approval_id == asked.approval_id
            [replayed] = chat_of("", [answer])  # a call that never came back is not replayed
            assert replayed.content == "Checking." and replayed.tool_calls == ()

    run(scenario)


def test_after_the_rounds_limit_the_model_must_answer_in_words(started_service, qwen, time_server) -> None:
    async def scenario() -> None:
        async with started_service(model=qwen) as started:
            service, doors, engine = started.service, started.doors, started.engine
            await doors.settings.update_settings(dataclasses.replace(doors.settings.settings, tool_rounds=2))
            await _chat_with_tools(started)
            await service.tools.save_choices(service.tools.choices.allowing("time", "get_current_time"))
            engine.scripts.extend([Script(text=(), calls=(PARIS,), endless=False)] * 2
                                  + [Script(text=("Enough.",), endless=False)])
            assert doors.chat.send("Keep calling")
            await doors.chat.wait_idle()
            choices = [r.shape.tool_choice for r in engine.requests if hasattr(r, "shape")][-3:]
            assert choices == ["auto", "auto", "none"]
            answer = (await stored(service, doors.chat.conversation.id))[-1]
            assert sum(isinstance(p, ToolCallPart) for p in answer.parts) == 2 and answer.text == "Enough."

    run(scenario)


def test_a_chat_without_tools_never_starts_a_server(started_service, qwen, time_server) -> None:
    async def scenario() -> None:
        async with started_service(model=qwen) as started:
            service, doors = started.service, started.doors
            assert doors.chat.send("Hello")
            await doors.chat.wait_idle()
            assert service.tools.statuses() == [] and started.engine.requests[-1].shape.tools is None

    run(scenario)


def test_a_turn_with_tools_replays_to_the_model_as_it_was_written() -> None:
    call = ToolCallPart("call_1", "time", "get_current_time", '{"timezone":"UTC"}')
    turn = Message(2, 1, Role.ASSISTANT, "Looking.\n\nIt is noon.", 0.0, MessageState.COMPLETE, None, "",
                   (TextPart("Looking."), call, ToolResultPart("call_1", '{"time":"12:00"}'), TextPart("It is noon.")))
    asked = Message(1, 1, Role.USER, "Time?", 0.0, MessageState.COMPLETE, None)
    chat = chat_of("Be brief.", [asked, turn])
    assert [(m.role.value, m.content) for m in chat] == [
        ("system", "Be brief."), ("user", "Time?"), ("assistant", "Looking."), ("tool", '{"time":"12:00"}'),
        ("assistant", "It is noon.")]
    assert chat[2].tool_calls[0].name == "get_current_time" and chat[3].tool_call_id == "call_1"
    assert SMALL.tools == ()
