"""After tools, an answer (issue 37, item 4): a repeated call is answered from the first result
without running again, and an answer left empty after tools' results says so and shows them.

The scripted engine plays what Qwen2.5-Coder 1.5B did with mcp-server-time (the same call twice,
then nothing); the server is the real mcp-server-time."""

from __future__ import annotations

import json

from app.core.conversation import MessageState, TextPart, ToolCallPart, ToolResultPart
from app.engine.protocol import Generate
from app.service import events as ev
from app.service.tools.tool_use import ToolDecision
from app.service.tools.tools_answered import NO_ANSWER
from tests.helpers.scripted_answers import Script
from tests.service.conftest import run, stored
from tests.service.test_tool_use import PARIS, _answer_each, _chat_with_tools
from tests.service.test_tool_use import qwen as qwen_model, time_server as time_mcp

qwen, time_server = qwen_model, time_mcp  # the fixtures, under the names the tests ask for

# The same call as PARIS, spelled with other spaces: the same arguments all the same.
PARIS_AGAIN = ("get_current_time", '{ "timezone": "Europe/Paris" }')
TOKYO = ("get_current_time", '{"timezone":"Asia/Tokyo"}')


def _generates(engine) -> list[Generate]:  # type: ignore[no-untyped-def]
    return [r for r in engine.requests if isinstance(r, Generate)]


def test_an_identical_call_is_not_run_again_and_the_model_gets_the_first_result(
        started_service, qwen, time_server) -> None:
    async def scenario() -> None:
        async with started_service(model=qwen) as started:
            service, doors, engine = started.service, started.doors, started.engine
            await _chat_with_tools(started)
            engine.scripts.extend([Script(text=(), calls=(PARIS,), endless=False),
                                   Script(text=(), calls=(PARIS_AGAIN, TOKYO), endless=False),
                                   Script(text=("Evening", " in", " Paris."), endless=False)])
            asked: list[ev.ToolApprovalAsked] = []
            _answer_each(started, ToolDecision.ALLOW_ONCE, asked)
            assert doors.chat.send("What time is it in Paris? Use the tool.")
            await doors.chat.wait_idle()
            # Allowed once each: a call that ran again would have been asked again.
            assert [json.loads(a.arguments)["timezone"] for a in asked] == ["Europe/Paris", "Asia/Tokyo"]
            answer = (await stored(service, doors.chat.conversation.id))[-1]
            first_call, first, again_call, again, tokyo_call, tokyo, said = answer.parts
            assert isinstance(first, ToolResultPart) and json.loads(first.text)["timezone"] == "Europe/Paris"
            assert isinstance(again_call, ToolCallPart) and again_call.name == "get_current_time"
            assert isinstance(again, ToolResultPart) and again.call_id == again_call.call_id
            assert "not run again" in again.text and first.text in again.text and not again.is_error
            assert isinstance(tokyo, ToolResultPart) and json.loads(tokyo.text)["timezone"] == "Asia/Tokyo"
            assert said == TextPart("Evening in Paris.") and answer.state == MessageState.COMPLETE
            replay = _generates(engine)[-1].messages
            given = {m.tool_call_id: m.content for m in replay if m.tool_call_id}
            assert given[again_call.call_id] == again.text, "the model is told the first result again"

    run(scenario)


def test_an_empty_answer_after_tools_says_so_and_shows_what_they_returned(started_service, qwen,
                                                                         time_server) -> None:
    async def scenario() -> None:
        async with started_service(model=qwen) as started:
            service, doors, engine = started.service, started.doors, started.engine
            await _chat_with_tools(started)
            asked: list[ev.ToolApprovalAsked] = []
            _answer_each(started, ToolDecision.ALLOW_ONCE, asked)
            for nothing in ((), ("\n", "\n ")):  # no token at all, or blank lines only
                engine.scripts.extend([Script(text=(), calls=(PARIS,), endless=False),
                                       Script(text=nothing, endless=False)])
                assert doors.chat.send("What time is it in Paris? Use the tool.")
                await doors.chat.wait_idle()
                answer = (await stored(service, doors.chat.conversation.id))[-1]
                result = answer.parts[1]
                assert isinstance(result, ToolResultPart)
                assert answer.state == MessageState.COMPLETE and answer.text.startswith(NO_ANSWER)
                assert f"get_current_time: {result.text}" in answer.text
                assert isinstance(answer.parts[-1], TextPart) and answer.parts[-1].text.startswith(NO_ANSWER)
                grew = [e for e in started.events.of(ev.TextGrew) if e.message_id == answer.id]
                assert NO_ANSWER in "".join(e.delta for e in grew), "the open chat is told, as of any text"

    run(scenario)


def test_an_answer_without_tools_is_left_as_the_model_wrote_it(started_service, qwen,
                                                                time_server) -> None:
    async def scenario() -> None:
        async with started_service(model=qwen) as started:
            service, doors, engine = started.service, started.doors, started.engine
            await _chat_with_tools(started)
            engine.scripts.extend([Script(text=(), endless=False),
                                   Script(text=(), calls=(PARIS,), endless=False),
                                   Script(text=("It", " is", " late."), endless=False)])
            _answer_each(started, ToolDecision.ALLOW_ONCE, [])
            for question in ("Hi", "Time in Paris?"):
                assert doors.chat.send(question)
                await doors.chat.wait_idle()
            empty, worded = [m for m in await stored(service, doors.chat.conversation.id) if m.role == "assistant"]
            assert NO_ANSWER not in empty.text and worded.text == "It is late."

    run(scenario)
