"""The service on the real engine end to end: llama.cpp in its own process, on the tiny
model and a small real one (Gemma 3 270M); the other service tests run on the scripted engine."""

from __future__ import annotations

import dataclasses
import os
import signal

import psutil
import pytest

from app.core.conversation import MessageState, Role
from app.core.quick_ask_settings import QuickAskSettings
from app.service import events as ev
from app.service.models.client import EngineClient
from app.service.events import ModelState
from tests.service.conftest import SMALL, engine_of, run, stored

QUICK = 0.01  # minutes: 0.6 s


async def _answered(started, text: str):
    assert started.doors.chat.send(text)
    await started.doors.chat.wait_idle()
    return started.doors.chat.messages[-1]


def test_send_streams_saves_and_reports_in_order(started_service) -> None:
    async def scenario():
        async with started_service(engine=EngineClient()) as started:
            service, doors, recorder = started.service, started.doors, started.events
            start = len(recorder.events)
            answer = await _answered(started, "Hello there")
            kinds = [type(e).__name__ for e in recorder.events[start:]
                     if not isinstance(e, (ev.TextGrew, ev.ActivityChanged, ev.ConversationChanged,
                                       ev.AnswerQueueChanged))]
            assert kinds == ["BusyChanged", "MessageAdded", "MessageAdded", "AnswerStarted", "AnswerFinished",
                             "BusyChanged"]
            assert answer.state == MessageState.COMPLETE and answer.stats.tokens == 24
            assert answer.stats.device == "CPU" and answer.stats.finish_reason in ("length", "stop")
            assert recorder.text_of(answer.id) == answer.text
            user, saved = await stored(service, answer.conversation_id)
            assert (user.role, user.text) == (Role.USER, "Hello there") and saved == answer
            assert doors.chat.conversation.title == "Hello there"

    run(scenario)


@pytest.mark.skipif(os.name == "nt", reason="SIGKILL stands in for a crash")
def test_engine_killed_mid_answer_keeps_the_text_and_the_next_send_works(started_service) -> None:
    async def scenario():
        long = dataclasses.replace(SMALL, max_tokens=100_000)
        async with started_service(long, engine=EngineClient()) as started:
            service, doors, recorder = started.service, started.doors, started.events
            assert doors.chat.send("Keep talking")
            await recorder.until(lambda: recorder.of(ev.AnswerStarted), what="the answer")
            answer_id = recorder.of(ev.AnswerStarted)[-1].message.id
            await recorder.until(lambda: len(recorder.text_of(answer_id)) > 30, what="some text")
            first_pid = engine_of(service).pid
            os.kill(first_pid, signal.SIGKILL)
            await doors.chat.wait_idle()
            cut = recorder.of(ev.AnswerInterrupted)[0]
            assert cut.reason == ev.InterruptReason.ENGINE_DIED and "stopped unexpectedly" in cut.detail
            assert cut.message.state == MessageState.INTERRUPTED and len(cut.message.text) > 30
            kept = (await stored(service, cut.message.conversation_id))[-1]
            assert kept.text == cut.message.text and kept.state == MessageState.INTERRUPTED
            problem = recorder.of(ev.Problem)[-1]
            assert problem.kind == "engine" and "stopped unexpectedly" in problem.text
            await doors.chat.set_conversation_settings("", dataclasses.replace(SMALL, max_tokens=8))
            answer = await _answered(started, "Are you back?")
            assert answer.state == MessageState.COMPLETE and answer.id != cut.message.id
            assert engine_of(service).pid not in (None, first_pid)
            assert doors.model.model_state == ev.ModelState.READY
            assert recorder.of(ev.ProblemSolved) == [ev.ProblemSolved("engine")]

    run(scenario)


@pytest.mark.starter
def test_the_starter_model_answers_through_the_chat_door(started_service, small_real_model) -> None:
    async def scenario():
        async with started_service(dataclasses.replace(SMALL, max_tokens=12), model=small_real_model,
                                      engine=EngineClient()) as started:
            answer = await _answered(started, "What is the capital of France?")
            assert answer.state == MessageState.COMPLETE and answer.text.strip()
            assert answer.stats.chat_format == "gemma" and answer.stats.tokens >= 1

    run(scenario, timeout=400)


@pytest.mark.starter
def test_unloading_the_starter_gives_its_memory_back(started_service, small_real_model) -> None:
    async def scenario():
        async with started_service(model=small_real_model, engine=EngineClient()) as started:
            service, doors = started.service, started.doors
            doors.chat.send("Hello")
            await doors.chat.wait_idle()
            engine = psutil.Process(engine_of(service).pid)
            loaded = engine.memory_info().rss
            await doors.settings.update_settings(dataclasses.replace(doors.settings.settings,
                                                                     unload_after_minutes=QUICK,
                                                                     quick_ask=QuickAskSettings(keep_model_ready=False)))
            await started.events.until(lambda: doors.model.model_state == ModelState.UNLOADED
                                       and engine_of(service).loaded is None, 10, "the unload")
            unloaded = engine.memory_info().rss
            doors.chat.send("Again")
            await doors.chat.wait_idle()
            return loaded, unloaded, doors.chat.messages[-1]

    loaded, unloaded, answer = run(scenario)
    mb = 1024 * 1024
    # Gemma 3 270M's weights and cache are about 370 MB; an empty engine is about 65 MB.
    assert loaded - unloaded > 250 * mb and unloaded < 120 * mb, (loaded // mb, unloaded // mb)
    assert answer.state == MessageState.COMPLETE and answer.text
