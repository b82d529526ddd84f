"""Prompt-lookup drafting: tokens/s on tasks that copy from their input, and on free-form text.

    python benchmarks/prompt_lookup.py [--model PATH] [--tokens 512] [--runs 3] [--json OUT]

Each task is answered at temperature 0 (the app's other sampling defaults) by:

- direct: llama-cpp-python in this process, `Llama.generate` on the same prompt tokens,
  the same context, threads and sampling (the throughput benchmark's direct side);
- Kestrel's engine through EngineClient with prompt lookup off, auto (the default) and on.

tokens/s is counted from the first token to the last as the caller receives them; the
sides alternate within each run so that drift on a shared machine hits them alike, and
the ratios are of medians over the runs. Whether each side's text equals the direct text
is reported, not asserted: llama.cpp's CPU kernels give a position slightly different
logits in a batch than alone, so a near tie can go the other way (docs/design.md).
Goals (issue 15): >= 1.5x direct on the input-grounded set; >= 0.97x on free-form.
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
from benchmarks.throughput import starter_model  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
CONTEXT = 4096
SIDES = ("direct", "off", "auto", "on")


def tasks() -> dict[str, tuple[str, str]]:
    """name -> (kind, prompt); kind is grounded (the answer copies from the input) or free."""
    code = (DATA / "orders.py").read_text(encoding="utf-8")
    paragraph = (DATA / "paragraph.txt").read_text(encoding="utf-8").strip()
    weather = (DATA / "rainfall.txt").read_text(encoding="utf-8").strip()
    return {
        "fix code (160 lines)": ("grounded", (
            "This module computes the wrong tax when an order has a discount: Order.tax multiplies by "
            "(1 + share) where it must be (1 - share). Reply with the whole corrected module in one "
            f"Python code block and nothing else.\n\n```python\n{code}```")),
        "rewrite a paragraph": ("grounded", (
            "Rewrite this paragraph with 'client' in place of 'customer' and 'the client' in place of "
            f"'the customer'. Change nothing else.\n\n{paragraph}")),
        "extract a table": ("grounded", (
            "Make a Markdown table of these notes with the columns Day, Station, Rain (mm) and High (°C), "
            f"one row per station and day, in the order of the text.\n\n{weather}")),
        # The starter echoes most instructions back; these two make it write text of its own
        # (which still starts to repeat itself after a hundred tokens or so).
        "a story": ("free", "Once upon a time, a kestrel lived at the edge of a meadow. Continue the story."),
        "an explanation": ("free", "Explain what a compiler does."),
    }


def sampling(tokens: int) -> GenerationSettings:
    return GenerationSettings(temperature=0.0, max_tokens=tokens, seed=1, context_length=CONTEXT)


class Direct:
    """llama-cpp-python called directly: the calls the engine makes, nothing around them."""

    def __init__(self, model: Path, threads: int) -> None:
        import llama_cpp

        self.llama_cpp = llama_cpp
        self.llm = llama_cpp.Llama(model_path=str(model), n_ctx=CONTEXT, n_threads=threads,
                                   n_threads_batch=threads, swa_full=True, verbose=False)
        self.info = read_gguf_info(model)
        self.bos = self.llm._model.token_get_text(self.llm.token_bos())

    def run(self, prompt_text: str, settings: GenerationSettings) -> dict:
        llm = self.llm
        llm.reset()
        spec = build_prompt((ChatMessage("user", prompt_text),), template=self.info.chat_template,
                            architecture=self.info.architecture, tokens=ModelTokens(bos=self.bos, eos=""))
        prompt = llm.tokenize(spec.text.encode(), add_bos=not spec.text.startswith(self.bos), special=True)
        first = last = None
        pieces: list[bytes] = []
        for token in llm.generate(prompt, top_k=settings.top_k, top_p=settings.top_p, min_p=0.0,
                                  temp=settings.temperature, repeat_penalty=settings.repeat_penalty):
            now = time.perf_counter()
            if self.llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                break
            pieces.append(llm.detokenize([token]))
            first = first or now
            last = now
            if len(pieces) >= settings.max_tokens:
                break
        return _result(first, last, len(pieces), b"".join(pieces).decode("utf-8", "replace"))

    def close(self) -> None:
        self.llm.close()


async def kestrel_run(client: EngineClient, prompt_text: str, settings: GenerationSettings, mode: str) -> dict:
    client.prompt_lookup = mode
    await client.reset()
    first = last = None
    text = ""
    count = 0
    async for event in client.generate((ChatMessage("user", prompt_text),), settings):
        now = time.perf_counter()
        if isinstance(event, Delta):
            first = first or now
            last = now
            text += event.text
        elif isinstance(event, Done):
            count = event.stats.tokens
    return _result(first, last, count, text)


def _result(first: float | None, last: float | None, count: int, text: str) -> dict:
    span = (last - first) if first and last else 0.0
    return {"tokens": count, "tokens_per_s": (count - 1) / span if span > 0 else 0.0, "text": text}


async def measure(model: Path, args) -> dict:
    direct = Direct(model, args.threads)
    client = EngineClient()
    settings = sampling(args.tokens)
    runs: dict[str, dict[str, list[dict]]] = {name: {side: [] for side in SIDES} for name in tasks()}
    try:
        await client.load(str(model), context_length=CONTEXT, threads=args.threads)
        for run in range(args.runs):
            for name, (_, prompt) in tasks().items():
                # The order of the sides turns each run, so none always goes first.
                order = SIDES[run % len(SIDES):] + SIDES[:run % len(SIDES)]
                for side in order:
                    if side == "direct":
                        result = await asyncio.to_thread(direct.run, prompt, settings)
                    else:
                        result = await kestrel_run(client, prompt, settings, side)
                    runs[name][side].append(result)
                    print(f"run {run + 1} {name:<22} {side:<6} {result['tokens']:>4} tokens "
                          f"{result['tokens_per_s']:>6.1f}/s", flush=True)
    finally:
        await client.shutdown()
        direct.close()
    return runs


def summarize(runs: dict[str, dict[str, list[dict]]]) -> dict:
    kinds = {name: kind for name, (kind, _) in tasks().items()}
    rows = {}
    for name, sides in runs.items():
        tps = {side: statistics.median(r["tokens_per_s"] for r in results) for side, results in sides.items()}
        reference = sides["direct"][0]["text"]
        rows[name] = {
            "kind": kinds[name],
            "tokens": statistics.median(r["tokens"] for r in sides["direct"]),
            "tokens_per_s": tps,
            "ratio": {side: tps[side] / tps["direct"] if tps["direct"] else None for side in SIDES if side != "direct"},
            "same_text_as_direct": {side: all(r["text"] == reference for r in results)
                                    for side, results in sides.items()},
            "same_text_as_off": {side: all(r["text"] == sides["off"][0]["text"] for r in results)
                                 for side in ("auto", "on") for results in [sides[side]]},
        }
    summary: dict = {"tasks": rows}
    for kind in ("grounded", "free"):
        chosen = [row for row in rows.values() if row["kind"] == kind]
        # A set's ratio: its tokens over its time, each task at its median speed.
        set_ratio = {}
        for side in ("off", "auto", "on"):
            time_side = sum(row["tokens"] / row["tokens_per_s"][side] for row in chosen)
            time_direct = sum(row["tokens"] / row["tokens_per_s"]["direct"] for row in chosen)
            set_ratio[side] = time_direct / time_side
        summary[kind] = set_ratio
    summary["goal_grounded_met"] = summary["grounded"]["auto"] >= 1.5
    summary["goal_free_met"] = summary["free"]["auto"] >= 0.97
    return summary


def print_tables(summary: dict, model: Path, args) -> None:
    print(f"\nmodel {model.name}, temperature 0, up to {args.tokens} tokens, {args.runs} runs, "
          f"{args.threads} threads (medians)")
    print(f"{'task':<22} {'kind':<8} {'tokens':>6} {'direct/s':>9} {'off':>6} {'auto':>6} {'on':>6} "
          f"{'same text as direct (off/auto/on)':>34}")
    for name, row in summary["tasks"].items():
        r, same = row["ratio"], row["same_text_as_direct"]
        marks = "/".join("yes" if same[side] else "no" for side in ("off", "auto", "on"))
        print(f"{name:<22} {row['kind']:<8} {row['tokens']:>6.0f} {row['tokens_per_s']['direct']:>9.1f} "
              f"{r['off']:>5.2f}x {r['auto']:>5.2f}x {r['on']:>5.2f}x {marks:>34}")
    for kind, goal in (("grounded", 1.5), ("free", 0.97)):
        s = summary[kind]
        met = summary[f"goal_{kind}_met"]
        print(f"{kind} set: off {s['off']:.2f}x, auto {s['auto']:.2f}x, on {s['on']:.2f}x of direct "
              f"(goal for auto >= {goal}x: {'met' if met else 'NOT met'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the starter model)")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "prompt_lookup.json")
    args = parser.parse_args()
    model = args.model or starter_model()
    runs = asyncio.run(measure(model, args))
    summary = summarize(runs)
    print_tables(summary, model, args)
    report = {"model": str(model), "tokens": args.tokens, "runs_count": args.runs, "threads": args.threads,
              "context": CONTEXT, "machine": platform.platform(), "python": platform.python_version(),
              "date": time.strftime("%Y-%m-%d"), "runs": runs, **summary}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
