"""What an idle Kestrel costs: the engine's memory before, while and after a model is
loaded, and the CPU the app uses with its window open and nothing to do.

    python benchmarks/idle_memory.py [--model PATH] [--idle-seconds 10] [--json OUT]

Memory: a real engine process (EngineClient) started empty, then with the model loaded
and one answer written (the KV cache in use), then after `unload()`, which is what the
model session does after Settings.unload_after_minutes. Goal: after unload within 50 MB of
the empty engine. RSS is read with psutil; "unique" (USS, memory only this process
holds) where the platform gives it.

Idle CPU: `python -m app` in its own home with the model ready, then the CPU time of the
app and its engine over --idle-seconds with no answer running. Goal: under 1% of one
core (no busy timers). Prints a table and writes JSON (default
benchmarks/results/idle_memory.json). The default model is the starter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MB = 1024 * 1024
GOAL_UNLOADED_MB = 50
GOAL_IDLE_CPU = 0.01


def _memory(pid: int) -> dict:
    process = psutil.Process(pid)
    try:
        info = process.memory_full_info()
        unique = getattr(info, "uss", None)
    except psutil.AccessDenied:
        info, unique = process.memory_info(), None
    return {"rss_mb": round(info.rss / MB, 1), "uss_mb": None if unique is None else round(unique / MB, 1)}


async def engine_memory(model: Path) -> dict:
    from app.engine.protocol import ChatMessage
    from app.core.generation import GenerationSettings
    from app.service.models.client import EngineClient

    client = EngineClient()
    try:
        await client.start()
        await asyncio.sleep(1.0)
        assert client.pid is not None
        empty = _memory(client.pid)
        await client.load(str(model), context_length=4096)
        async for _event in client.generate([ChatMessage("user", "Tell me about kestrels.")],
                                            GenerationSettings(max_tokens=64, temperature=0.0)):
            pass
        loaded = _memory(client.pid)
        await client.unload()
        await asyncio.sleep(1.0)
        unloaded = _memory(client.pid)
    finally:
        await client.shutdown()
    return {"empty": empty, "loaded": loaded, "unloaded": unloaded,
            "unloaded_minus_empty_mb": round(unloaded["rss_mb"] - empty["rss_mb"], 1)}


def idle_cpu(model: Path, seconds: float) -> dict:
    """The app and its engine, ready and idle: CPU seconds per second over `seconds`."""
    from benchmarks.startup import _wait_for, running_app

    with running_app(model) as (app, log):
        _wait_for(log, {"model_ready"}, timeout=180)
        time.sleep(2.0)  # let start-up work settle
        processes = [psutil.Process(app.pid), *psutil.Process(app.pid).children(recursive=True)]
        before = [p.cpu_times() for p in processes]
        time.sleep(seconds)
        after = [p.cpu_times() for p in processes]
    used = max(0.0, sum(a.user + a.system - b.user - b.system for a, b in zip(after, before)))
    return {"idle_seconds": seconds, "processes": len(processes), "cpu_share_of_a_core": round(used / seconds, 4)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the starter model)")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "idle_memory.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kestrel-model ") as folder:
        model = args.model
        if model is None:
            from tests.helpers.models import build_small_real
            model = build_small_real(Path(folder))
        memory = asyncio.run(engine_memory(model))
        cpu = idle_cpu(model, args.idle_seconds)
    result = {"model": model.name, "memory": memory, "idle": cpu,
              "goals": {"unloaded_within_mb_of_empty": GOAL_UNLOADED_MB, "idle_cpu_share": GOAL_IDLE_CPU}}
    print(f"model: {model.name}")
    print(f"{'engine':<10}{'RSS MB':>10}{'USS MB':>10}")
    for name in ("empty", "loaded", "unloaded"):
        row = memory[name]
        print(f"{name:<10}{row['rss_mb']:>10}{row['uss_mb'] if row['uss_mb'] is not None else '-':>10}")
    met = memory["unloaded_minus_empty_mb"] <= GOAL_UNLOADED_MB
    print(f"unloaded - empty: {memory['unloaded_minus_empty_mb']} MB (goal <= {GOAL_UNLOADED_MB}: "
          f"{'met' if met else 'NOT met'})")
    idle_met = cpu["cpu_share_of_a_core"] < GOAL_IDLE_CPU
    print(f"idle app + engine: {cpu['cpu_share_of_a_core'] * 100:.2f}% of a core over {cpu['idle_seconds']} s "
          f"(goal < 1%: {'met' if idle_met else 'NOT met'})")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
