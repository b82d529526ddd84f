"""Ask the starter the 25 everyday prompts at the settings a person gets, several seeds each; keep and judge the answers.

    python scripts/starter_defaults_eval.py                      the starter's own defaults, seeds 1 2 3
    python scripts/starter_defaults_eval.py --name NAME --temperature 0.3 --system "..."   a lever tried
    python scripts/starter_defaults_eval.py --rewrite NAME       the .md again from the .json and the judgements
    python scripts/starter_defaults_eval.py --name coder-1.5b --model PATH.gguf   a candidate starter at its own defaults

docs/starter/answers-*.md (scripts/starter_eval.py) were greedy (temperature 0), which is not
what a person's chat samples with. Here the settings are the ones a new chat with the starter
gets: the app's GenerationSettings with the starter's own defaults over them, read back from a
library the starter was assembled into by app.library.starter (so its recommended sampling is
filled in as for any install), one new chat per prompt through EngineClient, as the window
sends it. Only max_tokens is capped (MAX_TOKENS below) to keep 75 answers near a quarter of an
hour on a shared 2-core machine, and the seed is fixed per run so a rerun repeats.

Each run writes docs/starter/defaults-NAME.json (settings, seeds, answers) and .md. A person's
verdict on each answer goes in docs/starter/defaults-NAME-judged.json, {"PROMPT_ID/SEED":
["correct" | "acceptable" | "wrong", "why"]}, by the criteria in CRITERIA; --rewrite puts the
verdicts and their counts into the .md.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.conversation import Role  # noqa: E402
from app.core.generation import GenerationSettings  # noqa: E402
from app.engine.protocol import ChatMessage, Delta  # noqa: E402
from app.library.models import ModelLibrary  # noqa: E402
from app.library.recommended_sampling import sampling_for, with_recommended  # noqa: E402
from app.library.starter import STARTER_NAME, STARTER_SHA256, install_starter  # noqa: E402
from app.service.models.client import EngineClient  # noqa: E402

PROMPTS = ROOT / "docs" / "starter" / "prompts.json"
OUT = ROOT / "docs" / "starter"
SEEDS = (1, 2, 3)
# Long enough for every answer the greedy run gave (the longest ended at its 200-token cap)
# with room for the code and the lists; a longer answer is cut and judged on what it said.
MAX_TOKENS = 320
# One thread: on a 2-core machine that others share, two threads wait on each other (issue 37,
# item 2); the answers depend on the seed, not on the speed.
THREADS = 1
VERDICTS = ("correct", "acceptable", "wrong")
CRITERIA = """\
- **correct**: answers the question that was asked, with no factual or arithmetic error; code
  runs and does what was asked; writing keeps to the form asked for (two sentences, a haiku,
  one sentence) closely enough that a person would use it as it is.
- **acceptable**: answers the question and is right where it matters, with a flaw a person
  would shrug at: padding, a second haiku, an invented detail that does no harm, a list longer
  than asked, an answer cut at the token cap after the answer was given.
- **wrong**: restates or echoes the question instead of answering, a factual error (a wrong
  capital, a wrong sum or conversion), code that does not run or does not do what was asked,
  an answer to another question, or nothing useful before the cap."""


@dataclasses.dataclass(frozen=True)
class Answer:
    """One prompt's answer under one seed."""

    id: str
    kind: str
    seed: int
    prompt: str
    answer: str
    tokens: int
    seconds: float
    finish_reason: str


def person_settings(work: Path, temperature: float | None,
                    candidate: Path | None) -> tuple[GenerationSettings, str, Path, str]:
    """What a new chat with the starter (or a candidate GGUF) samples with: the app's defaults, the
    model's own over them as the library reads them back (by SHA-256 from the catalog); the source
    of the model's values, its path and its name."""
    library = ModelLibrary(work / "library")
    if candidate is None:
        installed = install_starter(library)
        sha256, name = STARTER_SHA256, f"{STARTER_NAME} Q4_K_M (the starter)"
    else:
        sha256 = sha256_of(candidate)
        installed = library.add_reference(candidate)
        name = candidate.stem
    model = library.get(installed.id)
    assert model is not None
    defaults = with_recommended(model.defaults, sha256)
    settings = defaults.generation(GenerationSettings())
    if temperature is not None:
        settings = dataclasses.replace(settings, temperature=temperature)
    sampling = sampling_for(sha256)
    return settings, sampling.source if sampling is not None else "none: the app's defaults", model.path, name


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


async def ask_all(path: Path, prompts: list[dict[str, Any]], settings: GenerationSettings,
                  system: str) -> list[Answer]:
    """Load the starter once; every prompt as a new chat, once per seed."""
    client = EngineClient()
    answers: list[Answer] = []
    try:
        await client.load(str(path), context_length=settings.context_length, threads=THREADS)
        for seed in SEEDS:
            seeded = dataclasses.replace(settings, seed=seed, max_tokens=MAX_TOKENS)
            for item in prompts:
                said = [ChatMessage(Role.SYSTEM, system)] if system else []
                chat = (*said, ChatMessage(Role.USER, str(item["prompt"])))
                begun, parts = time.perf_counter(), []
                async for event in client.generate(chat, seeded):
                    if isinstance(event, Delta):
                        parts.append(event.text)
                        continue
                    answers.append(Answer(str(item["id"]), str(item["kind"]), seed, str(item["prompt"]),
                                          "".join(parts), event.stats.tokens, time.perf_counter() - begun,
                                          str(event.stats.finish_reason)))
                    print(f"  seed {seed} {item['id']}: {event.stats.tokens} tokens", flush=True)
    finally:
        await client.shutdown()
    return answers


def write_json(name: str, model: str, settings: GenerationSettings, source: str, system: str,
               answers: list[Answer]) -> Path:
    path = OUT / f"defaults-{name}.json"
    data = {"model": model, "name": name, "seeds": list(SEEDS),
            "settings": {"temperature": settings.temperature, "top_p": settings.top_p, "top_k": settings.top_k,
                         "repeat_penalty": settings.repeat_penalty, "min_p": 0.0, "max_tokens": MAX_TOKENS,
                         "context_length": settings.context_length},
            "sampling_source": source, "system_prompt": system, "cpus": os.cpu_count(), "threads": THREADS,
            "answers": [dataclasses.asdict(a) for a in answers]}
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def write_md(name: str) -> dict[str, int]:
    """The .md from the .json and the judgements (where there are some); the verdict counts."""
    data = json.loads((OUT / f"defaults-{name}.json").read_text(encoding="utf-8"))
    judged_path = OUT / f"defaults-{name}-judged.json"
    judged = json.loads(judged_path.read_text(encoding="utf-8")) if judged_path.is_file() else {}
    counts = collections.Counter(judged.get(f"{a['id']}/{a['seed']}", ["unjudged"])[0] for a in data["answers"])
    s = data["settings"]
    lines = [f"# The starter at the settings a person gets: {name}", "",
             f"{data['model']}, through Kestrel's EngineClient, one new chat "
             f"per prompt, {len(data['answers'])} answers: the {len(data['answers']) // len(data['seeds'])} prompts "
             f"of prompts.json under seeds {', '.join(map(str, data['seeds']))}. Temperature {s['temperature']}, "
             f"top-p {s['top_p']}, top-k {s['top_k']}, repeat penalty {s['repeat_penalty']}, min-p {s['min_p']}, "
             f"context {s['context_length']}, at most {s['max_tokens']} tokens. System prompt: "
             f"{repr(data['system_prompt']) if data['system_prompt'] else 'none (the template’s own)'}. "
             f"Where the sampling comes from: {data['sampling_source']}. Written by scripts/starter_defaults_eval.py.", "",
             "Verdicts (a person's reading):", "", CRITERIA, "",
             "Counts: " + ", ".join(f"{v} {counts.get(v, 0)}" for v in (*VERDICTS, "unjudged") if counts.get(v) or v in VERDICTS),
             ""]
    for a in data["answers"]:
        verdict, why = judged.get(f"{a['id']}/{a['seed']}", ["unjudged", ""])
        quoted = "\n".join("> " + line if line else ">" for line in (a["answer"].strip() or "(nothing)").splitlines())
        lines += [f"## {a['id']} · seed {a['seed']} · **{verdict}**", "", f"*{a['prompt']}*", "", quoted, "",
                  f"*{a['tokens']} tokens · {a['seconds']:.1f} s · ended: {a['finish_reason']}*"
                  + (f" — {why}" if why else ""), ""]
    (OUT / f"defaults-{name}.md").write_text("\n".join(lines), encoding="utf-8")
    return dict(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="starter", help="the run's name in the file names")
    parser.add_argument("--temperature", type=float, help="a lever: this temperature instead of the default's")
    parser.add_argument("--system", default="", help="a lever: a system prompt for every chat")
    parser.add_argument("--model", type=Path, help="a candidate GGUF instead of the installed starter")
    parser.add_argument("--rewrite", metavar="NAME", help="the .md again from the .json and the judgements")
    args = parser.parse_args()
    if args.rewrite:
        print(write_md(args.rewrite))
        return
    prompts = json.loads(PROMPTS.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="starter-defaults-") as work:
        settings, source, path, model = person_settings(Path(work), args.temperature, args.model)
        print(f"settings: {settings}", flush=True)
        started = time.perf_counter()
        answers = asyncio.run(ask_all(path, prompts, settings, args.system))
        print(f"{len(answers)} answers in {time.perf_counter() - started:.0f} s", flush=True)
    write_json(args.name, model, settings, source, args.system, answers)
    print(write_md(args.name))


if __name__ == "__main__":
    main()
