"""An idle model is unloaded to give its memory back and loads again on the next message."""

from __future__ import annotations

import asyncio
import dataclasses

from app.core.conversation import MessageState
from app.service import events as ev
from app.service.events import ModelState
from app.service.models.idle import UNLOADED_WORDS
from tests.service.conftest import Recorder, run

QUICK = 0.01  # minutes: 0.6 s


def _states(events: Recorder) -> list[ModelState]:
    return [e.state for e in events.of(ev.ModelStateChanged)]


def test_an_idle_model_is_unloaded_then_loads_again_for_the_next_message(started_controller) -> None:
    async def scenario():
        async with started_controller() as started:
            controller, events, engine = started.controller, started.events, started.engine
            await controller.update_settings(dataclasses.replace(controller.settings, unload_after_minutes=QUICK))
            controller.send("Hello")
            await controller.wait_idle()
            pid = engine.pid
            await events.until(lambda: controller.model_state == ModelState.UNLOADED and engine.loaded is None,
                               10, "the unload")
            unloaded = (engine.loaded, controller.model_detail, engine.running, engine.pid == pid)
            controller.send("Again")
            await controller.wait_idle()
            return events, unloaded, controller.messages[-1], engine.pid == pid

    events, unloaded, answer, same_engine = run(scenario)
    assert unloaded == (None, UNLOADED_WORDS, True, True), "the model is gone, the engine process stays"
    states = _states(events)
    at = states.index(ModelState.UNLOADED)
    assert states[at + 1:at + 3] == [ModelState.LOADING, ModelState.READY], "the next message loads it again"
    assert answer.state == MessageState.COMPLETE and answer.text and same_engine
    assert not events.of(ev.Problem), "the user sees loading, not an error"


def test_the_engine_process_can_end_when_idle_and_start_again(started_controller) -> None:
    async def scenario():
        async with started_controller() as started:
            controller, engine = started.controller, started.engine
            await controller.update_settings(dataclasses.replace(controller.settings, unload_after_minutes=QUICK,
                                                                 exit_engine_when_idle=True))
            first = engine.pid
            await started.events.until(lambda: controller.model_state == ModelState.UNLOADED
                                       and not engine.running, 10, "the engine's exit")
            controller.send("Wake up")
            await controller.wait_idle()
            return controller.messages[-1], first, engine.pid

    answer, first, second = run(scenario)
    assert second not in (None, first)
    assert answer.state == MessageState.COMPLETE and answer.text


def test_never_keeps_the_model(started_controller) -> None:
    async def scenario():
        async with started_controller() as started:
            controller = started.controller
            await controller.update_settings(dataclasses.replace(controller.settings, unload_after_minutes=None))
            controller.send("Hello")
            await controller.wait_idle()
            await asyncio.sleep(1.0)
            return controller.model_state

    assert run(scenario) == ModelState.READY
