"""The controller on the real engine end to end: llama.cpp in its own process, on the tiny
model and a small real one (Gemma 3 270M); the other controller tests run on the scripted engine."""

from __future__ import annotations

import dataclasses
import os
import signal

import psutil
import pytest

from app.core.conversation import MessageState, Role
from app.service import events as ev
from app.service.models.client import EngineClient
from app.service.events import ModelState
from tests.service.conftest import SMALL, engine_of, run, stored

QUICK = 0.01  # minutes: 0.6 s


async def _answered(controller, text: str):
    assert controller.send(text)
    await controller.wait_idle()
    return controller.messages[-1]


def test_send_streams_saves_and_reports_in_order(started_controller) -> None:
    async def scenario():
        async with started_controller(engine=EngineClient()) as started:
            controller, recorder = started.controller, started.events
            start = len(recorder.events)
            answer = await _answered(controller, "Hello there")
            kinds = [type(e).__name__ for e in recorder.events[start:]
                     if not isinstance(e, (ev.TextGrew, ev.ActivityChanged, ev.ConversationChanged,
                                       ev.AnswerQueueChanged))]
            assert kinds == ["BusyChanged", "MessageAdded", "MessageAdded", "AnswerStarted", "AnswerFinished",
                             "BusyChanged"]
            assert answer.state == MessageState.COMPLETE and answer.stats.tokens == 24
            assert answer.stats.device == "CPU" and answer.stats.finish_reason in ("length", "stop")
            assert recorder.text_of(answer.id) == answer.text
            user, saved = await stored(controller, answer.conversation_id)
            assert (user.role, user.text) == (Role.USER, "Hello there") and saved == answer
            assert controller.conversation.title == "Hello there"

    run(scenario)


@pytest.mark.skipif(os.name == "nt", reason="SIGKILL stands in for a crash")
def test_engine_killed_mid_answer_keeps_the_text_and_the_next_send_works(started_controller) -> None:
    async def scenario():
        long = dataclasses.replace(SMALL, max_tokens=100_000)
        async with started_controller(long, engine=EngineClient()) as started:
            controller, recorder = started.controller, started.events
            assert controller.send("Keep talking")
            await recorder.until(lambda: recorder.of(ev.AnswerStarted), what="the answer")
            answer_id = recorder.of(ev.AnswerStarted)[-1].message.id
            await recorder.until(lambda: len(recorder.text_of(answer_id)) > 30, what="some text")
            first_pid = engine_of(controller).pid
            os.kill(first_pid, signal.SIGKILL)
            await controller.wait_idle()
            cut = recorder.of(ev.AnswerInterrupted)[0]
            assert cut.reason == ev.InterruptReason.ENGINE_DIED and "stopped unexpectedly" in cut.detail
            assert cut.message.state == MessageState.INTERRUPTED and len(cut.message.text) > 30
            kept = (await stored(controller, cut.message.conversation_id))[-1]
            assert kept.text == cut.message.text and kept.state == MessageState.INTERRUPTED
            problem = recorder.of(ev.Problem)[-1]
            assert problem.kind == "engine" and "stopped unexpectedly" in problem.text
            await controller.set_conversation_settings("", dataclasses.replace(SMALL, max_tokens=8))
            answer = await _answered(controller, "Are you back?")
            assert answer.state == MessageState.COMPLETE and answer.id != cut.message.id
            assert engine_of(controller).pid not in (None, first_pid)
            assert controller.model_state == ev.ModelState.READY
            assert recorder.of(ev.ProblemSolved) == [ev.ProblemSolved("engine")]

    run(scenario)


@pytest.mark.starter
def test_the_starter_model_answers_through_the_controller(started_controller, small_real_model) -> None:
    async def scenario():
        async with started_controller(dataclasses.replace(SMALL, max_tokens=12), model=small_real_model,
                                      engine=EngineClient()) as started:
            answer = await _answered(started.controller, "What is the capital of France?")
            assert answer.state == MessageState.COMPLETE and answer.text.strip()
            assert answer.stats.chat_format == "gemma" and answer.stats.tokens >= 1

    run(scenario, timeout=400)


@pytest.mark.starter
def test_unloading_the_starter_gives_its_memory_back(started_controller, small_real_model) -> None:
    async def scenario():
        async with started_controller(model=small_real_model, engine=EngineClient()) as started:
            controller = started.controller
            controller.send("Hello")
            await controller.wait_idle()
            engine = psutil.Process(engine_of(controller).pid)
            loaded = engine.memory_info().rss
            await controller.update_settings(dataclasses.replace(controller.settings, unload_after_minutes=QUICK))
            await started.events.until(lambda: controller.model_state == ModelState.UNLOADED
                                       and engine_of(controller).loaded is None, 10, "the unload")
            unloaded = engine.memory_info().rss
            controller.send("Again")
            await controller.wait_idle()
            return loaded, unloaded, controller.messages[-1]

    loaded, unloaded, answer = run(scenario)
    mb = 1024 * 1024
    # Gemma 3 270M's weights and cache are about 370 MB; an empty engine is about 65 MB.
    assert loaded - unloaded > 250 * mb and unloaded < 120 * mb, (loaded // mb, unloaded // mb)
    assert answer.state == MessageState.COMPLETE and answer.text
