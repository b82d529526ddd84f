"""An engine that dies on its own leaves nothing behind in Kestrel's process: its writer and reader threads
end and its pipe is closed, though nobody kill()s it (the client starts a new engine on the next request),
and so does an engine whose event loop closed before it.

Before, each death left a writer thread waiting for ever on its queue, holding the dead engine, its pipe,
the client and the event loop it posted to: the whole test suite in one process ended with 18 of them."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from typing import Callable

import pytest

from app.service.models.client import EngineClient
from app.service.models.engine_process import EngineProcess

pytestmark = pytest.mark.skipif(os.name == "nt", reason="SIGKILL stands in for an engine that crashes")

_ENGINE_THREADS = ("engine-client-writer", "engine-client-reader")


def _engine_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name in _ENGINE_THREADS}


def _alive(threads: set[threading.Thread]) -> list[str]:
    return [thread.name for thread in threads if thread.is_alive()]


async def _until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def test_an_engine_that_dies_on_its_own_ends_its_threads_and_closes_its_pipe() -> None:
    async def scenario() -> None:
        client = EngineClient()
        try:
            for _ in range(2):  # a death, a fresh engine, a second death
                before = _engine_threads()
                await client.start()
                engine = client._engine
                assert engine is not None and client.pid is not None
                mine = _engine_threads() - before
                assert sorted(_alive(mine)) == sorted(_ENGINE_THREADS)
                os.kill(client.pid, signal.SIGKILL)
                await _until(lambda: not client.running, 15, "the client to hear of the death")
                await _until(lambda: not _alive(mine), 10, f"the dead engine's threads to end: {_alive(mine)}")
                assert engine.conn.closed, "the dead engine's pipe is still open"
        finally:
            await client.shutdown()

    asyncio.run(asyncio.wait_for(scenario(), timeout=120))


def test_an_engine_whose_loop_closed_ends_with_its_threads_when_it_next_speaks_or_dies() -> None:
    """Nobody can hear it any more: the reader ends the writer and closes the pipe itself (the loop
    would have done it), and the engine, reading the pipe's end, exits."""
    before = _engine_threads()
    started: list[EngineProcess] = []

    async def start() -> None:
        started.append(EngineProcess(asyncio.get_running_loop(), lambda engine, event: None, None))

    asyncio.run(start())  # the loop closes with the engine just started: its Hello finds nobody
    engine, mine = started[0], _engine_threads() - before
    deadline = time.monotonic() + 20
    while _alive(mine) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not _alive(mine), f"still running: {_alive(mine)}"
        assert engine.conn.closed
        engine.process.join(10)
        assert engine.process.exitcode is not None, "the engine outlived its pipe"
    finally:
        engine.kill()
