"""A hung engine (SIGSTOP stands in for a driver that never returns) through the service:
said, ended, and started again at once when the user pressed Stop.

The client's own hang checks (noticed mid-answer, a paused engine left alone, Stop ends
it at once, quitting does not wait) run on the real client and the scripted engine
alike in test_engine_contract.py. The limits are short here; the app's are in
app/service/models/client.py.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from app.core.conversation import MessageState
from app.service import events as ev
from app.service.models.client import EngineClient
from tests.helpers.stopped_engine import freeze
from tests.service.conftest import SMALL, engine_of, run

pytestmark = pytest.mark.skipif(os.name == "nt", reason="SIGSTOP stands in for a hang")


def _client(**limits: float) -> EngineClient:
    return EngineClient(**{"hang_after": 2.0, "hang_after_loading": 5.0, "stop_grace": 1.0, "ping_every": 0.2,
                           **limits})


def test_the_service_says_so_and_stop_restarts_the_engine(started_service) -> None:
    async def scenario():
        async with started_service(dataclasses.replace(SMALL, max_tokens=100_000),
                                      engine=_client(hang_after=60.0)) as started:
            service, doors, recorder = started.service, started.doors, started.events
            assert doors.chat.send("Keep talking")
            await recorder.until(lambda: recorder.of(ev.AnswerStarted), what="the answer")
            answer_id = recorder.of(ev.AnswerStarted)[-1].message.id
            await recorder.until(lambda: len(recorder.text_of(answer_id)) > 20, what="some text")
            first_pid = engine_of(service).pid
            freeze(first_pid)
            doors.chat.stop()
            await doors.chat.wait_idle()
            cut = recorder.of(ev.AnswerInterrupted)[-1]
            assert cut.reason == ev.InterruptReason.ENGINE_DIED and "did not respond to Stop" in cut.detail
            assert cut.message.state == MessageState.INTERRUPTED and len(cut.message.text) > 20
            # Started again without waiting for the next message.
            await recorder.until(lambda: doors.model.model_state == ev.ModelState.READY
                                 and engine_of(service).pid not in (None, first_pid), what="the new engine")
            assert any("did not respond to Stop" in p.text for p in recorder.of(ev.Problem))
            await doors.chat.set_conversation_settings("", dataclasses.replace(SMALL, max_tokens=6))
            assert doors.chat.send("Back?")
            await doors.chat.wait_idle()
            assert doors.chat.messages[-1].state == MessageState.COMPLETE
    run(scenario)


def test_an_engine_idle_past_the_limit_is_not_ended_by_its_next_request(tiny_model) -> None:
    """Silence counts from the request: an engine idle for longer than hang_after and slow to take up the
    next request (frozen for less than the limit, as on a busy machine) answers it."""
    import asyncio
    import contextlib
    import signal

    from app.core.generation import GenerationSettings
    from app.engine.protocol import ChatMessage

    async def scenario():
        engine = _client(hang_after=1.0)
        try:
            await engine.load(str(tiny_model), context_length=512)
            await asyncio.sleep(1.6)  # idle: longer than hang_after
            pid = engine.pid
            freeze(pid)
            settings = GenerationSettings(max_tokens=4, temperature=0.0, seed=1)
            answer = asyncio.ensure_future(_all(engine.generate((ChatMessage("user", "Hello"),), settings)))
            await asyncio.sleep(0.6)  # the watchdog ticks while the engine cannot answer
            with contextlib.suppress(ProcessLookupError):  # ended as hung: the answer says so below
                os.kill(pid, signal.SIGCONT)
            events = await answer
            return events, engine.pid == pid
        finally:
            await engine.shutdown()

    events, same = run(scenario)
    assert events[-1].finish_reason == "length" and same


async def _all(stream) -> list:
    return [event async for event in stream]
