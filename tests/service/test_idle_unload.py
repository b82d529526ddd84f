"""An idle model is unloaded to give its memory back and loads again on the next message; with quick
ask on and keep_model_ready it stays loaded."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from app.core.conversation import MessageState
from app.core.quick_ask_settings import QuickAskSettings
from app.service import events as ev
from app.service.events import ModelState
from app.service.models.idle import UNLOADED_WORDS
from tests.service.conftest import Recorder, run

QUICK = 0.01  # minutes: 0.6 s
# Quick ask keeps the model ready by default: these tests of the unload turn that off.
NOT_KEPT = QuickAskSettings(keep_model_ready=False)


def _states(events: Recorder) -> list[ModelState]:
    return [e.state for e in events.of(ev.ModelStateChanged)]


def test_an_idle_model_is_unloaded_then_loads_again_for_the_next_message(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            doors, events, engine = started.doors, started.events, started.engine
            await doors.settings.update_settings(dataclasses.replace(doors.settings.settings,
                                                                     unload_after_minutes=QUICK,
                                                                     quick_ask=NOT_KEPT))
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
                                                                     exit_engine_when_idle=True, quick_ask=NOT_KEPT))
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


@pytest.mark.parametrize("quick_ask", [QuickAskSettings(), QuickAskSettings(enabled=True, keep_model_ready=True)])
def test_quick_ask_keeps_the_model_and_the_engine_ready(started_service, quick_ask) -> None:
    async def scenario():
        async with started_service() as started:
            doors, engine = started.doors, started.engine
            await doors.settings.update_settings(dataclasses.replace(
                doors.settings.settings, unload_after_minutes=QUICK, exit_engine_when_idle=True, quick_ask=quick_ask))
            pid = engine.pid
            doors.chat.send("Hello")
            await doors.chat.wait_idle()
            await asyncio.sleep(QUICK * 60 * 3)  # three times the idle wait
            return doors.model.model_state, engine.loaded is not None, engine.pid == pid, _states(started.events)

    state, loaded, same_engine, states = run(scenario)
    assert (state, loaded, same_engine) == (ModelState.READY, True, True)
    assert ModelState.UNLOADED not in states


@pytest.mark.parametrize("quick_ask", [QuickAskSettings(keep_model_ready=False), QuickAskSettings(enabled=False)])
def test_without_keeping_it_ready_or_with_quick_ask_off_the_idle_model_is_unloaded(started_service,
                                                                                   quick_ask) -> None:
    async def scenario():
        async with started_service() as started:
            doors, engine = started.doors, started.engine
            await doors.settings.update_settings(dataclasses.replace(
                doors.settings.settings, unload_after_minutes=QUICK, quick_ask=quick_ask))
            await started.events.until(lambda: doors.model.model_state == ModelState.UNLOADED
                                       and engine.loaded is None, 10, "the unload")
            return True

    assert run(scenario)


def test_keeping_it_ready_loads_again_a_model_unloaded_for_being_idle(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            doors, engine = started.doors, started.engine
            settings = dataclasses.replace(doors.settings.settings, unload_after_minutes=QUICK,
                                           exit_engine_when_idle=True, quick_ask=NOT_KEPT)
            await doors.settings.update_settings(settings)
            await started.events.until(lambda: doors.model.model_state == ModelState.UNLOADED
                                       and not engine.running, 10, "the engine's exit")
            await doors.settings.update_settings(dataclasses.replace(settings, quick_ask=QuickAskSettings()))
            await started.events.until(lambda: doors.model.model_state == ModelState.READY
                                       and engine.loaded is not None, 10, "the model loaded again")
            await asyncio.sleep(QUICK * 60 * 2)
            return doors.model.model_state

    assert run(scenario) == ModelState.READY, "and kept, once loaded again"
