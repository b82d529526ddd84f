"""Requests go to the real engine process through its writer thread: in order, without the
caller waiting, and a pipe that breaks or an engine that hangs still ends what waits."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.engine import protocol as p
from app.service.models.client import EngineClient
from app.service.models.engine_errors import EngineCrashed
from app.service.models.engine_process import Delivered, EngineProcess, NotSent, PipeClosed
from tests.helpers.stopped_engine import freeze

pytestmark = pytest.mark.skipif(os.name == "nt", reason="SIGSTOP stands in for an engine that does not read")

# 16 different images (pickle writes a repeated object once) of a big checked photo's size:
# the most one prompt takes, 24 MB in the pipe.
BIG = (p.ChatMessage("user", "What is in these?", images=tuple(os.urandom(1_500_000) for _ in range(16))),)
SHORT = GenerationSettings(max_tokens=4, temperature=0.0, seed=1)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=120))


def _writers() -> int:
    return sum(thread.name == "engine-client-writer" for thread in threading.enumerate())


class _Events:
    """What an EngineProcess hands the loop, and a way to wait for it."""

    def __init__(self) -> None:
        self.got: list[Delivered] = []
        self.changed = asyncio.Event()

    def deliver(self, engine: EngineProcess, event: Delivered) -> None:
        self.got.append(event)
        self.changed.set()

    async def until(self, predicate, timeout: float = 30) -> None:
        async def wait() -> None:
            while not predicate():
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(wait(), timeout)


def test_the_engine_reads_requests_in_the_order_they_were_sent_from_two_threads() -> None:
    """Pings, pauses and resumes are answered by the engine's reader as it reads them, so the
    order of their answers is the order the engine saw; Generates with 16 images sit between."""
    async def scenario() -> None:
        events = _Events()
        engine = EngineProcess(asyncio.get_running_loop(), events.deliver, None)
        try:
            await events.until(lambda: any(isinstance(e, p.Hello) for e in events.got))
            sent: list[int] = []
            order = threading.Lock()

            def send(request: p.Request) -> None:
                with order:
                    engine.send(request)
                    sent.append(request.request_id)

            def pinger() -> None:
                for n in range(300):
                    send(p.Ping(100_000 + n))

            other = threading.Thread(target=pinger)
            other.start()
            for n in range(1, 9):
                send(p.Generate(n, BIG, SHORT))
                send(p.Pause(1_000 + n))
                send(p.Resume(2_000 + n))
                await asyncio.sleep(0)
            other.join()
            acked = {request_id for request_id in sent if request_id > 1_000}
            await events.until(lambda: {e.request_id for e in events.got if isinstance(e, p.Ack)} >= acked)
            answered = [e.request_id for e in events.got if isinstance(e, p.Ack)]
            assert answered == [request_id for request_id in sent if request_id > 1_000]
            # Each Generate arrived whole (no model is loaded, so each is refused in words).
            await events.until(lambda: len([e for e in events.got if isinstance(e, p.Error)]) == 8)
        finally:
            engine.kill()
        assert not engine.process.is_alive()
    run(scenario())


def test_send_returns_at_once_while_the_engine_does_not_read() -> None:
    async def scenario() -> None:
        events = _Events()
        engine = EngineProcess(asyncio.get_running_loop(), events.deliver, None)
        try:
            await events.until(lambda: any(isinstance(e, p.Hello) for e in events.got))
            freeze(engine.process.pid)
            started = time.perf_counter()
            engine.send(p.Generate(1, BIG, SHORT))  # 24 MB: a direct write would wait for ever
            engine.send(p.Ping(2))
            took = time.perf_counter() - started
            assert took < 0.05, f"send held the caller {took * 1000:.1f} ms"
            os.kill(engine.process.pid, signal.SIGCONT)
            await events.until(lambda: any(isinstance(e, p.Ack) and e.request_id == 2 for e in events.got))
        finally:
            engine.kill()
    run(scenario())


def test_a_request_that_cannot_be_pickled_is_handed_back_and_the_engine_goes_on() -> None:
    async def scenario() -> None:
        events = _Events()
        engine = EngineProcess(asyncio.get_running_loop(), events.deliver, None)
        try:
            engine.send(p.CountTokens(1, text=threading.Lock()))  # type: ignore[arg-type]
            engine.send(p.Ping(2))
            await events.until(lambda: any(isinstance(e, p.Ack) and e.request_id == 2 for e in events.got))
            refused = [e for e in events.got if isinstance(e, NotSent)]
            assert [e.request_id for e in refused] == [1] and isinstance(refused[0].cause, TypeError)
            assert engine.process.is_alive()
        finally:
            engine.kill()
    run(scenario())


def test_an_answer_whose_write_breaks_ends_with_engine_crashed(tiny_model: Path) -> None:
    """The engine stops reading halfway through a 24 MB Generate and is then killed: the
    writer's write fails, the reader sees the pipe close, and the answer ends, not waits."""
    async def scenario() -> None:
        client = EngineClient()
        try:
            await client.load(str(tiny_model), context_length=512)
            pid = client.pid
            assert pid is not None
            freeze(pid)

            async def answer() -> None:
                async for _ in client.generate(BIG, SHORT):
                    pass

            task = asyncio.create_task(answer())
            await asyncio.sleep(0.3)  # the writer is inside the write now: the pipe is full
            assert not task.done()
            os.kill(pid, signal.SIGKILL)
            with pytest.raises(EngineCrashed):
                await asyncio.wait_for(task, 15)
            # The next request starts a fresh engine and reloads the model.
            events = [e async for e in client.generate((p.ChatMessage("user", "Hi"),), SHORT)]
            assert isinstance(events[-1], p.Done) and client.pid not in (None, pid)
        finally:
            await client.shutdown()
    run(scenario())


def test_a_request_made_after_the_pipe_closed_but_before_the_loop_heard_ends() -> None:
    async def scenario() -> None:
        client = EngineClient()
        try:
            await client.start()
            pid = client.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)  # on the loop: the reader has posted PipeClosed, nobody has run it yet
            assert client.running
            # Awaited directly, so that the request is sent before the loop runs PipeClosed
            # (a task would start after it and find the engine dead).
            with pytest.raises(EngineCrashed):
                await client.hardware_report()
            assert client.restarts == 0 and not client.running
        finally:
            await client.shutdown()
    run(scenario())


def test_shutdown_ends_within_its_timeout_while_a_big_write_is_stuck() -> None:
    async def scenario() -> None:
        client = EngineClient(stop_grace=0.5)
        before = _writers()
        await client.start()
        assert _writers() == before + 1
        pid = client.pid
        assert pid is not None
        freeze(pid)
        client._engine.send(p.Generate(1, BIG, SHORT))  # type: ignore[union-attr]
        await asyncio.sleep(0.2)
        started = time.monotonic()
        await client.shutdown(timeout=2.0)
        took = time.monotonic() - started
        assert took < 2.0 + 5.0, f"shutdown took {took:.1f} s"
        assert client.pid is None
        assert _writers() == before, "the writer thread outlived its engine"
    run(scenario())


def test_a_healthy_engine_gets_ping_and_shutdown_and_exits_by_itself() -> None:
    async def scenario() -> None:
        client = EngineClient()
        await client.start()
        engine = client._engine
        assert engine is not None
        await client.shutdown(timeout=10.0)
        assert engine.process.exitcode == 0, "the engine was killed instead of exiting on Shutdown"
        assert engine.last_ping_answered > 0
    run(scenario())


def test_a_write_that_fails_otherwise_ends_the_engine_so_the_reader_reports_it() -> None:
    """Not a broken pipe (the child's end is open): a write refused by the handle itself. The
    engine would be alive and out of reach; it is killed, and PipeClosed follows."""
    async def scenario() -> None:
        events = _Events()
        engine = EngineProcess(asyncio.get_running_loop(), events.deliver, None)
        socket_kept = -1
        try:
            await events.until(lambda: any(isinstance(e, p.Hello) for e in events.got))
            # The socket stays open (the reader waits on it, the engine sees no end), but the
            # writer's handle number now names a read-only file: its write fails with EBADF.
            socket_kept = os.dup(engine.conn.fileno())
            with open(os.devnull, "rb") as read_only:
                os.dup2(read_only.fileno(), engine.conn.fileno())
            engine.send(p.Ping(1))
            await events.until(lambda: any(isinstance(e, PipeClosed) for e in events.got), timeout=15)
            closed = [e for e in events.got if isinstance(e, PipeClosed)]
            assert closed[0].exit_code == -signal.SIGKILL
            with pytest.raises(BrokenPipeError):
                engine.send(p.Ping(2))
        finally:
            engine.kill()
            if socket_kept >= 0:
                os.close(socket_kept)
    run(scenario())
