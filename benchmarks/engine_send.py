"""How long sending a Generate with 16 images holds the calling thread (the window's event loop).

    python benchmarks/engine_send.py [--images 16] [--image-mb 1.5] [--runs 10] [--no-engine] [--json OUT]

Before (direct write): the request is pickled and written with a plain Connection.send on
the caller's thread into a pipe a spawned child reads; the call returns only when the child
has taken all but the last 64 KB out of the pipe. After: PipeWriter.send over the same kind
of pipe and child, and EngineProcess.send to the real engine process (no model loaded, so it
answers the Generate with an error once it has read it). For each, p50 and max over the runs:
send, how long send() held the caller; stall, the longest the calling thread could not run
from the send until the answer (it steps as fast as it can meanwhile: this counts the writer
thread holding the interpreter lock too, which send's own time does not); answered, until
the other side had read the request whole and answered. The images are different random
bytes (pickle writes a repeated object once). Prints a table, writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS.parent))

from app.engine import protocol as p  # noqa: E402
from app.service.models.pipe_writer import PipeWriter  # noqa: E402


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else 0.0


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(values, 0.5), 3), "max_ms": round(max(values), 3)}


def read_and_answer(conn: Connection) -> None:
    """The spawned child: read each request whole, answer with its id; stop on Shutdown."""
    while True:
        request = conn.recv()
        conn.send(request.request_id)
        if isinstance(request, p.Shutdown):
            return


def generate(request_id: int, images: int, image_bytes: int) -> p.Generate:
    pictures = tuple(os.urandom(image_bytes) for _ in range(images))
    return p.Generate(request_id, (p.ChatMessage("user", "What is in these pictures?", images=pictures),))


class Stalls:
    """The longest time this thread could not run: it steps as fast as it can and keeps the
    longest gap between two steps (the send itself, or another thread holding the lock)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._last = time.perf_counter()

    def step(self) -> None:
        now = time.perf_counter()
        self.longest = max(self.longest, now - self._last)
        self._last = now


def measure_pipe(send: Callable[[p.Request], None], answers: Connection, requests: list[p.Generate]) -> dict[str, Any]:
    """Time send() on this thread, then step until the child's answer to the same request."""
    held, stalled, answered = [], [], []
    for request in requests:
        stalls = Stalls()
        started = time.perf_counter()
        send(request)
        held.append((time.perf_counter() - started) * 1000)
        stalls.step()
        while not answers.poll(0):
            stalls.step()
        answered.append((time.perf_counter() - started) * 1000)
        stalled.append(stalls.longest * 1000)
        assert answers.recv() == request.request_id
    return {"caller": summary(held), "stall": summary(stalled), "answered": summary(answered)}


def floor(runs: int, seconds: float = 0.05) -> dict[str, Any]:
    """The same stepping with nothing sent: how long this machine leaves the thread without a turn."""
    stalled = []
    for _ in range(runs):
        stalls = Stalls()
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            stalls.step()
        stalled.append(stalls.longest * 1000)
    return {"caller": summary([0.0]), "stall": summary(stalled), "answered": summary([0.0])}


def direct(requests: list[p.Generate]) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe(duplex=True)
    child = ctx.Process(target=read_and_answer, args=(theirs,), daemon=True)
    child.start()
    theirs.close()
    try:
        return measure_pipe(ours.send, ours, requests)
    finally:
        ours.send(p.Shutdown(0))
        child.join(10)


def through_writer(requests: list[p.Generate]) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe(duplex=True)
    child = ctx.Process(target=read_and_answer, args=(theirs,), daemon=True)
    child.start()
    theirs.close()
    failed: list[str] = []
    writer = PipeWriter(ours, on_broken=lambda e: failed.append(repr(e)),
                        on_unsendable=lambda r, e: failed.append(repr(e)))
    try:
        return measure_pipe(writer.send, ours, requests)
    finally:
        writer.send(p.Shutdown(0))
        writer.close()
        writer.join(10)
        child.join(10)
        assert not failed, failed


async def through_engine(requests: list[p.Generate]) -> dict[str, Any]:
    """EngineProcess.send to the real engine; its answer (an error: no model) comes to the loop."""
    from app.service.models.engine_process import Delivered, EngineProcess

    heard: asyncio.Queue[Delivered] = asyncio.Queue()
    engine = EngineProcess(asyncio.get_running_loop(), lambda _, event: heard.put_nowait(event), None)
    try:
        assert isinstance(await asyncio.wait_for(heard.get(), 60), p.Hello)
        held, stalled, answered = [], [], []
        for request in requests:
            stalls = Stalls()
            started = time.perf_counter()
            engine.send(request)
            held.append((time.perf_counter() - started) * 1000)
            stalls.step()
            while heard.empty():  # the loop runs (and hears the answer) between steps
                await asyncio.sleep(0)
                stalls.step()
            answered.append((time.perf_counter() - started) * 1000)
            stalled.append(stalls.longest * 1000)
            event = heard.get_nowait()
            assert isinstance(event, p.Error) and event.request_id == request.request_id, event
        return {"caller": summary(held), "stall": summary(stalled), "answered": summary(answered)}
    finally:
        engine.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=16)
    parser.add_argument("--image-mb", type=float, default=1.5)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--no-engine", action="store_true", help="leave out the real engine process")
    parser.add_argument("--json", type=Path, default=BENCHMARKS / "results" / "engine_send.json")
    args = parser.parse_args()
    image_bytes = int(args.image_mb * 1_000_000)
    requests = [generate(n, args.images, image_bytes) for n in range(1, args.runs + 1)]
    from multiprocessing.reduction import ForkingPickler
    size = len(ForkingPickler.dumps(requests[0]))
    rows = {"nothing sent (floor, 50 ms)": floor(args.runs), "conn.send (before)": direct(requests),
            "PipeWriter.send (after)": through_writer(requests)}
    if not args.no_engine:
        rows["EngineProcess.send, real engine (after)"] = asyncio.run(through_engine(requests))
    result = {"images": args.images, "image_bytes": image_bytes, "request_bytes": size, "runs": args.runs,
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "rows": rows}
    print(f"Generate with {args.images} images of {image_bytes / 1e6:.1f} MB: {size / 2**20:.1f} MiB pickled, "
          f"{args.runs} runs")
    print(f"{'':42}{'send p50':>10}{'send max':>10}{'stall p50':>11}{'stall max':>11}{'answered p50':>14}"
          f"{'answered max':>14}")
    for label, row in rows.items():
        print(f"{label:42}{row['caller']['p50_ms']:>8.3f}ms{row['caller']['max_ms']:>8.3f}ms"
              f"{row['stall']['p50_ms']:>9.1f}ms{row['stall']['max_ms']:>9.1f}ms"
              f"{row['answered']['p50_ms']:>12.1f}ms{row['answered']['max_ms']:>12.1f}ms")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
