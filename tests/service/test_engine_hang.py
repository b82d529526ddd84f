"""A hung engine (SIGSTOP stands in for a driver that never returns) is noticed, said,
and ended; Stop ends it at once and starts it again; quitting does not wait for it.

Before the heartbeat, Stop did nothing, the status stayed "Thinking…" for ever, and
quitting took 10 s. The limits are short here; the app's are in app/service/client.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time
from pathlib import Path

import pytest

from app.core.conversation import MessageState
from app.core.generation import GenerationSettings
from app.engine.protocol import ChatMessage
from app.service import events as ev
from app.service.client import EngineClient
from app.service.engine_errors import EngineCrashed, EngineDied
from tests.service.conftest import SMALL, engine_of, run

LONG = GenerationSettings(max_tokens=100_000, temperature=0.0, seed=1)
HELLO = (ChatMessage("user", "Hello there"),)

pytestmark = pytest.mark.skipif(os.name == "nt", reason="SIGSTOP stands in for a hang")


def _client(**limits: float) -> EngineClient:
    return EngineClient(**{"hang_after": 2.0, "hang_after_loading": 5.0, "stop_grace": 1.0, "ping_every": 0.2,
                           **limits})


def _freeze(pid: int) -> None:
    """SIGSTOP the engine and wait until the kernel says every thread of it is stopped
    (a thread busy at that moment may otherwise still answer one ping)."""
    import psutil

    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while psutil.Process(pid).status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
        time.sleep(0.005)
    assert psutil.Process(pid).status() == psutil.STATUS_STOPPED


async def _first_deltas(client: EngineClient, stream, count: int = 3) -> None:
    for _ in range(count):
        await stream.__anext__()


def test_a_silent_engine_is_ended_and_reported_mid_answer(tiny_model: Path) -> None:
    async def scenario():
        client = _client()
        died: list[EngineDied] = []
        client.on_died = died.append
        await client.load(str(tiny_model), context_length=512)
        stream = client.generate(HELLO, LONG)
        await _first_deltas(client, stream)
        _freeze(client.pid)
        stopped = time.monotonic()
        with pytest.raises(EngineCrashed) as crashed:
            async for _ in stream:
                pass
        waited = time.monotonic() - stopped
        assert "stopped responding" in crashed.value.message and "next message starts a new engine" in crashed.value.message
        assert 1.5 < waited < 6
        assert died and not died[0].restart and "stopped responding" in died[0].message
        assert not client.running
        await client.shutdown()
    run(scenario)


def test_a_paused_engine_answers_pings_and_is_not_ended(tiny_model: Path) -> None:
    """Silence in the answer is not a hang: a paused (or busy) engine still answers pings."""
    async def scenario():
        client = _client()
        await client.load(str(tiny_model), context_length=512)
        stream = client.generate(HELLO, GenerationSettings(max_tokens=60, temperature=0.0, seed=1))
        await _first_deltas(client, stream)
        pid = client.pid
        client.pause()
        await asyncio.sleep(5)  # more than twice hang_after
        client.resume()
        events = [event async for event in stream]
        assert events[-1].finish_reason == "length"
        assert client.pid == pid and client.running
        await client.shutdown()
    run(scenario)


def test_stop_ends_a_hung_engine_at_once(tiny_model: Path) -> None:
    async def scenario():
        client = _client(hang_after=60.0)
        died: list[EngineDied] = []
        client.on_died = died.append
        await client.load(str(tiny_model), context_length=512)
        stream = client.generate(HELLO, LONG)
        await _first_deltas(client, stream)
        _freeze(client.pid)
        stopped = time.monotonic()
        client.cancel()
        with pytest.raises(EngineCrashed) as crashed:
            async for _ in stream:
                pass
        assert time.monotonic() - stopped < 3
        assert "did not respond to Stop" in crashed.value.message
        assert died and died[0].restart
        await client.shutdown()
    run(scenario)


def test_quitting_does_not_wait_for_a_hung_engine(tiny_model: Path) -> None:
    async def scenario():
        client = _client()
        await client.load(str(tiny_model), context_length=512)
        _freeze(client.pid)
        started = time.monotonic()
        await client.shutdown(timeout=10)
        assert time.monotonic() - started < 2.5
        assert client.pid is None
    run(scenario)


def test_the_controller_says_so_and_stop_restarts_the_engine(started_controller) -> None:
    async def scenario():
        async with started_controller(dataclasses.replace(SMALL, max_tokens=100_000),
                                      engine=_client(hang_after=60.0)) as started:
            controller, recorder = started.controller, started.events
            assert controller.send("Keep talking")
            await recorder.until(lambda: recorder.of(ev.AnswerStarted), what="the answer")
            answer_id = recorder.of(ev.AnswerStarted)[-1].message.id
            await recorder.until(lambda: len(recorder.text_of(answer_id)) > 20, what="some text")
            first_pid = engine_of(controller).pid
            _freeze(first_pid)
            controller.stop()
            await controller.wait_idle()
            cut = recorder.of(ev.AnswerInterrupted)[-1]
            assert cut.reason == ev.InterruptReason.ENGINE_DIED and "did not respond to Stop" in cut.detail
            assert cut.message.state == MessageState.INTERRUPTED and len(cut.message.text) > 20
            # Started again without waiting for the next message.
            await recorder.until(lambda: controller.model_state == ev.ModelState.READY
                                 and engine_of(controller).pid not in (None, first_pid), what="the new engine")
            assert any("did not respond to Stop" in p.text for p in recorder.of(ev.Problem))
            await controller.set_conversation_settings("", dataclasses.replace(SMALL, max_tokens=6))
            assert controller.send("Back?")
            await controller.wait_idle()
            assert controller.messages[-1].state == MessageState.COMPLETE
    run(scenario)
