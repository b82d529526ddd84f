"""An idle model is unloaded to give its memory back and loads again on the next message."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import psutil
import pytest

from app.core.conversation import MessageState
from app.service import events as ev
from app.service.events import ModelState
from app.service.idle import UNLOADED_WORDS
from tests.service.conftest import Recorder, install, make_controller, run

QUICK = 0.01  # minutes: 0.6 s


def _states(events: Recorder) -> list[ModelState]:
    return [e.state for e in events.of(ev.ModelStateChanged)]


def test_an_idle_model_is_unloaded_then_loads_again_for_the_next_message(tiny_model: Path) -> None:
    install(tiny_model)

    async def scenario():
        controller = make_controller()
        events = Recorder(controller)
        await controller.start_up()
        await controller.update_settings(dataclasses.replace(controller.settings, unload_after_minutes=QUICK))
        controller.send("Hello")
        await controller.wait_idle()
        pid = controller.session.client.pid
        await events.until(lambda: controller.model_state == ModelState.UNLOADED and controller.session.client.loaded is None,
                           10, "the unload")
        unloaded = (controller.session.client.loaded, controller.model_detail, psutil.pid_exists(pid))
        controller.send("Again")
        await controller.wait_idle()
        answer = controller.messages[-1]
        same_engine = controller.session.client.pid == pid
        await controller.shutdown()
        return events, unloaded, answer, same_engine

    events, unloaded, answer, same_engine = run(scenario)
    assert unloaded == (None, UNLOADED_WORDS, True), "the model is gone, the engine process stays"
    states = _states(events)
    at = states.index(ModelState.UNLOADED)
    assert states[at + 1:at + 3] == [ModelState.LOADING, ModelState.READY], "the next message loads it again"
    assert answer.state == MessageState.COMPLETE and answer.text and same_engine
    assert not events.of(ev.Problem), "the user sees loading, not an error"


def test_the_engine_process_can_end_when_idle_and_start_again(tiny_model: Path) -> None:
    install(tiny_model)

    async def scenario():
        controller = make_controller()
        await controller.start_up()
        await controller.update_settings(dataclasses.replace(controller.settings, unload_after_minutes=QUICK,
                                                             exit_engine_when_idle=True))
        first = controller.session.client.pid

        def gone() -> bool:
            try:
                return psutil.Process(first).status() == psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                return True

        await Recorder(controller).until(lambda: controller.model_state == ModelState.UNLOADED and gone(),
                                         10, "the engine's exit")
        controller.send("Wake up")
        await controller.wait_idle()
        answer, second = controller.messages[-1], controller.session.client.pid
        await controller.shutdown()
        return answer, first, second

    answer, first, second = run(scenario)
    assert second not in (None, first)
    assert answer.state == MessageState.COMPLETE and answer.text


def test_never_keeps_the_model(tiny_model: Path) -> None:
    install(tiny_model)

    async def scenario():
        controller = make_controller()
        await controller.start_up()
        await controller.update_settings(dataclasses.replace(controller.settings, unload_after_minutes=None))
        controller.send("Hello")
        await controller.wait_idle()
        import asyncio
        await asyncio.sleep(1.0)
        state = controller.model_state
        await controller.shutdown()
        return state

    assert run(scenario) == ModelState.READY


@pytest.mark.starter
def test_unloading_the_starter_gives_its_memory_back(starter_model: Path) -> None:
    install(starter_model)

    async def scenario():
        controller = make_controller()
        await controller.start_up()
        controller.send("Hello")
        await controller.wait_idle()
        engine = psutil.Process(controller.session.client.pid)
        loaded = engine.memory_info().rss
        await controller.update_settings(dataclasses.replace(controller.settings, unload_after_minutes=QUICK))
        await Recorder(controller).until(lambda: controller.model_state == ModelState.UNLOADED
                                         and controller.session.client.loaded is None, 10, "the unload")
        unloaded = engine.memory_info().rss
        controller.send("Again")
        await controller.wait_idle()
        answer = controller.messages[-1]
        await controller.shutdown()
        return loaded, unloaded, answer

    loaded, unloaded, answer = run(scenario)
    mb = 1024 * 1024
    # The starter's weights and cache are about 370 MB; an empty engine is about 65 MB.
    assert loaded - unloaded > 250 * mb and unloaded < 120 * mb, (loaded // mb, unloaded // mb)
    assert answer.state == MessageState.COMPLETE and answer.text
