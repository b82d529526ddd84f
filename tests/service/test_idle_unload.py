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


def test_an_idle_model_is_unloaded_then_loads_again_for_the_next_message(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            doors, events, engine = started.doors, started.events, started.engine
            await doors.settings.update_settings(dataclasses.replace(doors.settings.settings,
                                                                     unload_after_minutes=QUICK))
            doors.chat.send("Hello")
            await doors.chat.wait_idle()
            pid = engine.pid
            await events.until(lambda: doors.model.model_state == ModelState.UNLOADED and engine.loaded is None,
                               10, "the unload")
            unloaded = (engine.loaded, doors.model.model_detail, engine.running, engine.pid == pid)
            doors.chat.send("Again")
            await doors.chat.wait_idle()
            return events, unloaded, doors.chat.messages[-1], engine.pid == pid

    events, unloaded, answer, same_engine = run(scenario)
    assert unloaded == (None, UNLOADED_WORDS, True, True), "the model is gone, the engine process stays"
    states = _states(events)
    at = states.index(ModelState.UNLOADED)
    assert states[at + 1:at + 3] == [ModelState.LOADING, ModelState.READY], "the next message loads it again"
    assert answer.state == MessageState.COMPLETE and answer.text and same_engine
    assert not events.of(ev.Problem), "the user sees loading, not an error"


def test_the_engine_process_can_end_when_idle_and_start_again(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            doors, engine = started.doors, started.engine
            await doors.settings.update_settings(dataclasses.replace(doors.settings.settings,
                                                                     unload_after_minutes=QUICK,
                                                                 exit_engine_when_idle=True))
            first = engine.pid
            await started.events.until(lambda: doors.model.model_state == ModelState.UNLOADED
                                       and not engine.running, 10, "the engine's exit")
            doors.chat.send("Wake up")
            await doors.chat.wait_idle()
            return doors.chat.messages[-1], first, engine.pid

    answer, first, second = run(scenario)
    assert second not in (None, first)
    assert answer.state == MessageState.COMPLETE and answer.text


def test_never_keeps_the_model(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            doors = started.doors
            await doors.settings.update_settings(dataclasses.replace(doors.settings.settings,
                                                                     unload_after_minutes=None))
            doors.chat.send("Hello")
            await doors.chat.wait_idle()
            await asyncio.sleep(1.0)
            return doors.model.model_state

    assert run(scenario) == ModelState.READY
