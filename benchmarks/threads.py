"""Decode speed with another program busy: Kestrel's thread choice against all cores and one.

    python benchmarks/threads.py [--model PATH] [--tokens 48] [--runs 2] [--json OUT]

A busy process (a Python loop) pinned to core 0 plays the unrelated program; the real
engine (EngineClient) decodes the same greedy answer with every physical core, with one
thread, and with what Kestrel's ThreadAdvisor chooses after measuring the load (the
cores other programs keep busy, from the system's CPU times less Kestrel's own). Then
the same without the busy process. Goal: Kestrel's choice is never below 80% of the
best of the three in the same run. Prints a table and writes JSON (default
benchmarks/results/threads.json). Linux only (the busy process is pinned with
sched_setaffinity); the default model is the starter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GOAL_SHARE = 0.8
PROMPT = "Write a short story about a kestrel that learns to hover over a motorway."
_BUSY = "import os, sys\nos.sched_setaffinity(0, {0})\nwhile True:\n    pass\n"


async def measure(model: Path, tokens: int, runs: int) -> dict:
    from app.core.generation import GenerationSettings
    from app.engine.protocol import ChatMessage, Done
    from app.engine.backends.resources import default_threads
    from app.service.models.client import EngineClient
    from app.service.models.threads import BusyMeter, ThreadAdvisor

    cores = default_threads()
    client = EngineClient()
    meter = BusyMeter(lambda: [os.getpid(), *([client.pid] if client.pid else [])])
    advisor = ThreadAdvisor(None, cores=cores, busy=meter.look)
    settings = GenerationSettings(max_tokens=tokens, temperature=0.0, seed=1, context_length=2048)

    async def speed(threads: int) -> float:
        async for event in client.generate([ChatMessage("user", PROMPT)], settings, threads=threads):
            if isinstance(event, Done):
                await client.reset()
                return event.stats.tokens_per_s
        raise RuntimeError("no Done")

    try:
        await client.load(str(model), context_length=2048)
        meter.look()
        await asyncio.sleep(1.5)  # a quiet spell for the meter to see the load, as between two answers
        choice = advisor.choose("benchmark")
        rows = {}
        for name, threads in (("kestrel", choice.threads), ("all cores", cores), ("one thread", 1)):
            rows[name] = {"threads": threads,
                          "tokens_per_s": statistics.median([await speed(threads) for _ in range(runs)])}
    finally:
        await client.shutdown()
    best = max(row["tokens_per_s"] for row in rows.values())
    return {"cores": cores, "choice_reason": choice.reason, "rows": rows,
            "kestrel_share_of_best": round(rows["kestrel"]["tokens_per_s"] / best, 3) if best else 0.0}


def with_busy_process(model: Path, tokens: int, runs: int) -> dict:
    busy = subprocess.Popen([sys.executable, "-c", _BUSY])
    try:
        time.sleep(0.5)
        return asyncio.run(measure(model, tokens, runs))
    finally:
        busy.kill()
        busy.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the starter model)")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "threads.json")
    args = parser.parse_args()
    if not hasattr(os, "sched_setaffinity"):
        print("threads.py pins its busy process with sched_setaffinity: Linux only", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kestrel-model ") as folder:
        model = args.model
        if model is None:
            from tests.helpers.models import build_small_real
            model = build_small_real(Path(folder))
        result = {"model": model.name, "tokens": args.tokens, "runs": args.runs,
                  "busy": with_busy_process(model, args.tokens, args.runs),
                  "quiet": asyncio.run(measure(model, args.tokens, args.runs)), "goal_share": GOAL_SHARE}
    print(f"model: {model.name}, {args.tokens} tokens, median of {args.runs}")
    print(f"{'machine':<8}{'setting':<12}{'threads':>8}{'tok/s':>9}")
    ok = True
    for case in ("busy", "quiet"):
        for name, row in result[case]["rows"].items():
            print(f"{case:<8}{name:<12}{row['threads']:>8}{row['tokens_per_s']:>9.1f}")
        share = result[case]["kestrel_share_of_best"]
        ok = ok and share >= GOAL_SHARE
        print(f"{case}: Kestrel's choice ({result[case]['choice_reason']}) gets {share:.0%} of the best "
              f"(goal >= {GOAL_SHARE:.0%})")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    print(f"written: {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
