"""A file attached to a chat: time to first token of the first question, and of a second one in the same chat.

    python benchmarks/document_answers.py [--model PATH] [--tokens 6000] [--runs 3] [--json OUT]

Through the service as the window uses it: its chat and attach doors over a temporary home, the real
engine process (EngineClient) with saved states on (the default settings), the instruct
model (Qwen2.5-Coder 0.5B Instruct, the starter: tests/helpers/models.py assembles it, or
--model). Each run opens a new chat, attaches a made-up document of about --tokens tokens
(read by the reader's worker, as the window's paperclip does), asks one question, then a
different one. The file is framed whole on the first user turn and stays there
(app/service/documents/document_context.py), so the second prompt starts with the first one's
tokens and the engine reads only what is new. Each run's document differs from its first
line, so no run reuses another's states.

Measured per question: the engine's TTFT (AnswerStats.ttft_ms), the wall time from send()
to the first TextGrew (what the window waits: framing, the line, the engine), and the
prompt's tokens and those evaluated (not reused). Goal (issue 25): the second question's
TTFT at most 10% of the first's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONTEXT = 8192
FACTS = ["The kestrel club meets on Thursdays at 7 in room 12.",
         "The club's treasurer is Mira Okafor, elected in March."]
QUESTIONS = ["When does the kestrel club meet?", "Who is the club's treasurer?"]


def document(run: int, tokens: int) -> str:
    """Made-up survey notes of about `tokens` tokens (4 characters each, estimated) with the two
    facts inside; the first line names the run, so each run's prompt is new to the engine."""
    topics = ["harbour tides", "orchard pruning", "railway timetables", "glacier melt", "bread ovens"]
    paragraphs = [f"Survey notes, run {run} ({time.time():.0f})."]
    i = 0
    while sum(len(p) for p in paragraphs) < tokens * 4:
        paragraphs.append(f"Paragraph {i} on {topics[i % len(topics)]}: the figures for week {i} were recorded by "
                          f"the survey team, checked twice and filed under shelf {i * 7 % 31}.")
        i += 1
    paragraphs.insert(len(paragraphs) // 3, FACTS[0])
    paragraphs.insert(2 * len(paragraphs) // 3, FACTS[1])
    return "\n\n".join(paragraphs)


def instruct_model() -> Path:
    from tests.helpers.models import build_instruct

    folder = ROOT / "benchmarks" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    path = build_instruct(folder)
    if path is None:
        raise SystemExit("The instruct model's chunk packages (the starter extra) are not installed; give --model.")
    return path


async def measure(model: Path, tokens: int, runs: int, folder: Path) -> list[dict]:
    from app.core.generation import GenerationSettings
    from app.core.paths import data_paths
    from app.core.settings import Settings, SettingsFile
    from app.library.importer import import_model_file
    from app.library.models import ModelLibrary
    from app.service import events as ev
    from app.service.doors.attach import AttachDoor
    from app.service.doors.chat import ChatDoor
    from app.service.doors.models import ModelDoor
    from app.service.models.client import EngineClient
    from app.service.root import Service

    paths = data_paths().ensure()
    installed = import_model_file(ModelLibrary(paths.models), model)
    generation = GenerationSettings(temperature=0.0, max_tokens=24, seed=1, context_length=CONTEXT)
    SettingsFile(paths.settings_file).save(Settings(default_model=installed.id, generation=generation))
    service = Service(history_path=paths.history_db, settings_path=paths.settings_file,
                      library=ModelLibrary(paths.models), client=EngineClient())
    chat, attach, model_door = ChatDoor(service), AttachDoor(service), ModelDoor(service)
    first_text: list[float] = []
    service.subscribe(lambda event: first_text.append(time.perf_counter())
                      if isinstance(event, ev.TextGrew) and not first_text else None)
    rows = []
    try:
        await service.start_up()
        if model_door.loaded is None:
            raise SystemExit(f"The model did not load: {model_door.model_detail}")
        for run in range(runs):
            chat.new_conversation()
            path = folder / f"survey-{run}.txt"
            path.write_text(document(run, tokens), encoding="utf-8")
            attachments = await attach.read_attachments([path])
            for number, question in enumerate(QUESTIONS, start=1):
                first_text.clear()
                sent = time.perf_counter()
                assert chat.send(question, attachments if number == 1 else ())
                await chat.wait_idle()
                answer = chat.messages[-1]
                stats = answer.stats
                assert stats is not None and not stats.error, answer
                rows.append({"run": run, "question": number, "engine_ttft_ms": round(stats.ttft_ms, 1),
                             "service_ttft_ms": round((first_text[0] - sent) * 1000, 1) if first_text else None,
                             "prompt_tokens": stats.prompt_tokens, "evaluated": stats.prompt_tokens_evaluated,
                             "sources": len(answer.sources), "answer": answer.text})
                print(f"run {run} question {number}: engine TTFT {stats.ttft_ms:,.0f} ms, prompt "
                      f"{stats.prompt_tokens:,} tokens ({stats.prompt_tokens_evaluated:,} evaluated)", flush=True)
    finally:
        await service.shutdown()
    return rows


def summary(rows: list[dict]) -> dict:
    def median(question: int, key: str) -> float:
        return statistics.median(r[key] for r in rows if r["question"] == question and r[key] is not None)

    result: dict = {}
    for key in ("engine_ttft_ms", "service_ttft_ms", "prompt_tokens", "evaluated"):
        result[key] = {"first": median(1, key), "second": median(2, key)}
    result["second_over_first"] = {key: round(result[key]["second"] / result[key]["first"], 4)
                                   for key in ("engine_ttft_ms", "service_ttft_ms")}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a GGUF instruct model (default: the starter, assembled)")
    parser.add_argument("--tokens", type=int, default=6000, help="the document's length in tokens (estimated)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "document_answers.json")
    args = parser.parse_args()
    model = args.model or instruct_model()
    with tempfile.TemporaryDirectory() as home:
        os.environ["KESTREL_HOME"] = home
        rows = asyncio.run(measure(model, args.tokens, args.runs, Path(home)))
    result = summary(rows)
    print(f"\nmodel {model.name}, a document of ~{args.tokens:,} tokens, {args.runs} runs (medians), "
          f"{os.cpu_count()} CPUs")
    print(f"{'question':<10} {'prompt':>8} {'evaluated':>10} {'engine TTFT ms':>15} {'service TTFT ms':>16}")
    for which in ("first", "second"):
        print(f"{which:<10} {result['prompt_tokens'][which]:>8,.0f} {result['evaluated'][which]:>10,.0f} "
              f"{result['engine_ttft_ms'][which]:>15,.0f} {result['service_ttft_ms'][which]:>16,.0f}")
    ratio = result["second_over_first"]
    print(f"second / first: engine {ratio['engine_ttft_ms']:.1%}, service {ratio['service_ttft_ms']:.1%} "
          "(goal: at most 10%)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"model": model.name, "tokens": args.tokens, "runs": args.runs,
                                     "context": CONTEXT, "machine": platform.platform(), "cpus": os.cpu_count(),
                                     "summary": result, "rows": rows}, indent=2) + "\n", encoding="utf-8")
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
