"""Tokens/s and time to first token: llama-cpp-python called directly vs Kestrel's path.

    python benchmarks/throughput.py [--model PATH] [--tokens 128] [--runs 5] [--json OUT]

Both sides get the same model file, prompt text, context, threads and greedy sampling.
Kestrel's side is timed where a caller sees it: from calling EngineClient.generate to the
first Delta arriving over the pipe, and from the first to the last token received.
Goal: Kestrel keeps >= 98% of the direct tokens/s and adds < 20 ms to the first token.

A third side is the command line measured from outside: `python -m app chat --json`
in a subprocess, its delta lines timed as this process reads them (first to last), as
another program reading Kestrel's output would. Goal: >= 98% of the direct tokens/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.generation import GenerationSettings  # noqa: E402
from app.engine.templates.chat_format import ModelTokens, build_prompt  # noqa: E402
from app.engine.protocol import ChatMessage, Delta, Done  # noqa: E402
from app.engine.backends.resources import default_threads  # noqa: E402
from app.library.model_files.gguf_info import read_gguf_info  # noqa: E402
from app.service.models.client import EngineClient  # noqa: E402

PROMPT = (ChatMessage("user", "Write a long, detailed story about a kestrel hunting over a meadow."),)
CONTEXT = 2048


def direct_runs(model: Path, tokens: int, runs: int, threads: int) -> list[dict]:
    """llama-cpp-python in this process: the same calls the engine makes, nothing around them."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(model), n_ctx=CONTEXT, n_threads=threads,
                          n_threads_batch=threads, swa_full=True, verbose=False)
    info = read_gguf_info(model)
    bos = llm._model.token_get_text(llm.token_bos())
    results = []
    for _ in range(runs):
        llm.reset()
        start = time.perf_counter()
        # Rendering and tokenizing count on both sides: a caller pays for them either way.
        spec = build_prompt(PROMPT, template=info.chat_template, architecture=info.architecture,
                            tokens=ModelTokens(bos=bos, eos=""))
        prompt = llm.tokenize(spec.text.encode(), add_bos=not spec.text.startswith(bos), special=True)
        first = last = None
        count = 0
        for token in llm.generate(prompt, top_k=40, top_p=0.95, min_p=0.0, temp=0.0, repeat_penalty=1.1):
            now = time.perf_counter()
            if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                break
            llm.detokenize([token])
            first = first or now
            last = now
            count += 1
            if count >= tokens:
                break
        results.append(_result(start, first, last, count))
    llm.close()
    return results


async def kestrel_runs(model: Path, tokens: int, runs: int, threads: int) -> list[dict]:
    """EngineClient -> engine process -> events, timed on the caller's side."""
    client = EngineClient()
    settings = GenerationSettings(temperature=0.0, max_tokens=tokens, seed=1, context_length=CONTEXT)
    results = []
    try:
        await client.load(str(model), context_length=CONTEXT, threads=threads)
        for _ in range(runs):
            await client.reset()
            start = time.perf_counter()
            first = last = None
            async for event in client.generate(PROMPT, settings):
                now = time.perf_counter()
                if isinstance(event, Delta):
                    first = first or now
                    last = now
                elif isinstance(event, Done):
                    results.append(_result(start, first, last, event.stats.tokens))
    finally:
        await client.shutdown()
    return results


def cli_runs(model: Path, tokens: int, runs: int, threads: int) -> list[dict]:
    """`python -m app chat --json` in its own home, its deltas timed as they are read."""
    import os
    import subprocess
    import tempfile

    results = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="kestrel-cli ") as home:
            command = [sys.executable, "-m", "app", "chat", "--model", str(model), "--json", "--max-tokens",
                       str(tokens), "--temperature", "0", "--seed", "1", "--ctx", str(CONTEXT), "--threads",
                       str(threads), PROMPT[0].content]
            process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       env=dict(os.environ, KESTREL_HOME=home), text=True, encoding="utf-8")
            start = time.perf_counter()
            first = last = None
            count = 0
            assert process.stdout is not None
            for line in process.stdout:
                now = time.perf_counter()
                item = json.loads(line)
                if item["type"] == "delta":
                    first = first or now
                    last = now
                elif item["type"] == "done":
                    count = item["tokens"]
            process.wait(timeout=60)
            result = _result(start, first, last, count)
            result["ttft_ms"] = None  # from outside it includes starting Python: not comparable
            results.append(result)
    return results


def _result(start: float, first: float | None, last: float | None, count: int) -> dict:
    span = (last - first) if first and last else 0.0
    return {
        "ttft_ms": (first - start) * 1000 if first else None,
        "tokens": count,
        "tokens_per_s": (count - 1) / span if span > 0 else 0.0,
    }


def summarize(direct: list[dict], kestrel: list[dict]) -> dict:
    med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    d_tps, k_tps = med(direct, "tokens_per_s"), med(kestrel, "tokens_per_s")
    d_ttft, k_ttft = med(direct, "ttft_ms"), med(kestrel, "ttft_ms")
    return {
        "direct": {"tokens_per_s": d_tps, "ttft_ms": d_ttft},
        "kestrel": {"tokens_per_s": k_tps, "ttft_ms": k_ttft},
        "tokens_per_s_ratio": k_tps / d_tps if d_tps else None,
        "ttft_added_ms": k_ttft - d_ttft,
        "goal_met": bool(d_tps and k_tps / d_tps >= 0.98 and k_ttft - d_ttft < 20),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the starter model)")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "throughput.json")
    args = parser.parse_args()
    model = args.model or starter_model()
    # Alternate the two sides so that drift on a shared machine hits both alike.
    direct, kestrel, cli = [], [], []
    for _ in range(args.runs):
        direct += direct_runs(model, args.tokens, 1, args.threads)
        kestrel += asyncio.run(kestrel_runs(model, args.tokens, 1, args.threads))
        cli += cli_runs(model, args.tokens, 1, args.threads)
    summary = summarize(direct, kestrel)
    cli_tps = statistics.median(r["tokens_per_s"] for r in cli)
    summary["cli_from_outside"] = {"tokens_per_s": cli_tps,
                                   "ratio": cli_tps / summary["direct"]["tokens_per_s"]
                                   if summary["direct"]["tokens_per_s"] else None}
    _print_table(summary, model, args)
    report = {"model": str(model), "tokens": args.tokens, "runs": args.runs, "threads": args.threads,
              "machine": platform.platform(), "python": platform.python_version(),
              "direct_runs": direct, "kestrel_runs": kestrel, "cli_runs": cli, **summary}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"\nwritten: {args.json}")
    return 0


def starter_model() -> Path:
    """Gemma 3 270M (the old starter, the tests' small real model) assembled under
    benchmarks/results: the model the benchmarks' tables were measured on (the other benchmarks use it too)."""
    from tests.helpers.models import build_small_real

    folder = ROOT / "benchmarks" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    return build_small_real(folder)


def _print_table(summary: dict, model: Path, args) -> None:
    d, k = summary["direct"], summary["kestrel"]
    print(f"model {model.name}, {args.tokens} tokens, {args.runs} runs, {args.threads} threads (medians)")
    print(f"{'path':<10} {'tokens/s':>10} {'TTFT ms':>10}")
    print(f"{'direct':<10} {d['tokens_per_s']:>10.1f} {d['ttft_ms']:>10.1f}")
    print(f"{'kestrel':<10} {k['tokens_per_s']:>10.1f} {k['ttft_ms']:>10.1f}")
    cli = summary["cli_from_outside"]
    print(f"{'chat CLI':<10} {cli['tokens_per_s']:>10.1f} {'-':>10}   (read from outside: ratio "
          f"{cli['ratio']:.3f}, goal >= 0.98)")
    print(f"ratio {summary['tokens_per_s_ratio']:.3f} (goal >= 0.98), "
          f"TTFT added {summary['ttft_added_ms']:+.1f} ms (goal < 20): "
          f"{'met' if summary['goal_met'] else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
