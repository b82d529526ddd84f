"""Memory: how long choosing a chat's memories takes, what they add to its prompt, and a new chat's TTFT with them.

    python benchmarks/memory.py [--memories 10000] [--questions 300] [--chats 5] [--model PATH]
                                [--embedding-model GGUF] [--json OUT]

Selection: a history file with --memories made-up memories (tests/helpers/memory_facts.py, with the fixture's
expected ones among them) and each question's choice timed as an answer makes it: on the store
(choose_on_store), and through the storage's writer thread (MemoryBook.for_answer's path), with the budget
of a 4,096-token context. Also the few-memories case, where every memory goes. Goal (issue 41): p95 at most
10 ms at 10,000 memories.

Hybrid (with --embedding-model, e.g. the all-MiniLM-L6-v2 GGUF scripts/make_embedding_gguf.py writes): every
memory's vector made first (minutes at 10,000 on a small machine: not timed), then each question's vector
timed on its own (the embedding process, as the documents' worker runs it) and the hybrid choice on the store
(BM25 fused with the cosine over the memories' vectors, held in memory between answers); also one read of the
vectors after they changed (what the first answer after a forget or a new vector pays).

Engine: through the service as the window uses it (its chat, memory and settings doors over a temporary
home, the real engine process, saved states on by default), the starter (Qwen2.5-Coder 0.5B Instruct,
assembled as tests/helpers/models.py does, or --model) and 30 memories. --chats new chats are asked with
memory off, then the same questions in new chats with memory on; the first chat of each side is the cold one
(nothing saved yet), the others what a person meets every day. Measured: the engine's TTFT, the prompt's
tokens and those evaluated (not reused from a saved state). Goal: a new chat's TTFT with memory within 10% of
one without, since the memories' section is the same prefix for every chat.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONTEXT = 4096
FIXTURE = ROOT / "tests" / "fixtures" / "memory" / "memories.json"
PERSON = ["My daughter is called Ada.", "I write Python at work.", "My dog Biscuit is a beagle.",
          "My wife Mei's birthday is on 14 March.", "I prefer short answers without bullet points.",
          "I drive a blue Volvo estate.", "I am allergic to peanuts.", "My son Leo plays the cello.",
          "I live in Leeds.", "I work as a data engineer at a bakery chain.", "I am learning Portuguese.",
          "I run 5 km on Tuesdays and Saturdays.", "My favourite editor is Neovim.", "I use Fedora at home.",
          "My manager is called Priya.", "I have a standing desk.", "I drink my coffee black.",
          "My mother lives in Porto.", "I am vegetarian.", "I play chess online in the evenings.",
          "My bike is a green Brompton.", "I keep bees in the garden.", "My sister Hana is a nurse.",
          "I read mostly science fiction.", "My team deploys on Thursdays.", "I am saving for a trip to Kyoto.",
          "My laptop is a ThinkPad X1.", "I prefer metric units.", "My son's school is St Anne's.",
          "I get up at six."]
QUESTIONS = ["How do I reverse a list in Python?", "Suggest a name for a beagle puppy.",
             "What is a good dinner for tonight?", "Explain what a CSV file is.", "Plan a short run for me.",
             "What should I read next?", "How do I centre a div?", "Give me a birthday present idea."]


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def _ms(values: list[float]) -> dict:
    return {"p50": round(statistics.median(values), 3), "p95": round(_percentile(values, 0.95), 3),
            "max": round(max(values), 3)}


def selection(count: int, questions: int, folder: Path) -> dict:
    """Time choose_on_store on a store of `count` memories, and of 20 (every one fits)."""
    from app.core.memories import MemoryOrigin
    from app.core.store.history import HistoryStore
    from app.core.store.memories import add_memory
    from app.service.chats.memory.memory_choice import choose_on_store, memory_budget
    from app.service.storage import Storage
    from tests.helpers.memory_facts import made_facts

    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    asked = [q["question"] for q in fixture["queries"]]
    facts = made_facts(count - len(PERSON), seed=43) + PERSON
    budget = memory_budget(CONTEXT)
    result: dict = {}
    for size in (count, 20):
        path = folder / f"selection-{size}.sqlite3"
        with HistoryStore(path) as store:
            with store.transaction():
                for text in facts[-size:]:
                    add_memory(store, text, MemoryOrigin.CLI)
            texts = (asked + facts[:questions])[:questions]
            choose_on_store(store, texts[0], budget)  # the first statement compiles; the app's did long before
            times, picked = [], []
            for text in texts:
                start = time.perf_counter()
                chosen = choose_on_store(store, text, budget)
                times.append((time.perf_counter() - start) * 1000)
                picked.append(len(chosen.memories))
        via_writer = asyncio.run(_through_writer(Storage, path, texts, budget))
        result[str(size)] = {"store_ms": _ms(times), "writer_thread_ms": _ms(via_writer),
                             "memories_chosen": statistics.median(picked), "questions": len(texts)}
    return result


def hybrid_selection(count: int, questions: int, folder: Path, model: Path) -> dict:
    """Time the question's vector and the hybrid choice on the store of `count` memories made by selection()."""
    import numpy as np

    from app.core.store.history import HistoryStore
    from app.core.store.memories import keep_memory_vectors, list_memories
    from app.documents.embedding import EmbeddingProcess
    from app.service.chats.memory.memory_choice import choose_on_store, memory_budget
    from app.service.chats.memory.memory_vectors import MemoryQuery, MemoryVectors, vector_bytes
    from tests.helpers.memory_facts import made_facts

    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    texts = ([q["question"] for q in fixture["queries"]] + made_facts(count - len(PERSON), seed=43)[:questions])
    texts = texts[:questions]
    budget = memory_budget(CONTEXT)
    with EmbeddingProcess(model) as embedder, HistoryStore(folder / f"selection-{count}.sqlite3") as store:
        memories = list_memories(store)
        print(f"making the vectors of {len(memories):,} memories with {model.name}…", flush=True)
        for first in range(0, len(memories), 256):
            part = memories[first:first + 256]
            keep_memory_vectors(store, embedder.model_id, [(m.id, m.text, vector_bytes(v))
                                                          for m, v in zip(part, embedder.embed([m.text for m in part]))])
        embedder.embed([texts[0]])
        queries, embed_times = [], []
        for text in texts:
            start = time.perf_counter()
            vector = embedder.embed([text])[0]
            embed_times.append((time.perf_counter() - start) * 1000)
            queries.append(MemoryQuery(embedder.model_id, np.asarray(vector, dtype=np.float32)))
        reads = []
        for query in queries[:10]:
            start = time.perf_counter()
            MemoryVectors().nearest(store, query, 64)
            reads.append((time.perf_counter() - start) * 1000)
        vectors = MemoryVectors()
        choose_on_store(store, texts[0], budget, queries[0], vectors)  # the matrix read once, as after a change
        times, picked = [], []
        for text, query in zip(texts, queries):
            start = time.perf_counter()
            chosen = choose_on_store(store, text, budget, query, vectors)
            times.append((time.perf_counter() - start) * 1000)
            picked.append(len(chosen.memories))
    return {"memories": count, "model": model.name, "question_vector_ms": _ms(embed_times),
            "store_ms": _ms(times), "vectors_read_ms": _ms(reads), "memories_chosen": statistics.median(picked),
            "questions": len(texts)}


async def _through_writer(storage_class, path: Path, texts: list[str], budget: int) -> list[float]:
    from app.service.chats.memory.memory_choice import choose_on_store

    storage = await storage_class.open(path, None)
    times = []
    try:
        for text in texts:
            start = time.perf_counter()
            await storage.history(choose_on_store, text, budget)
            times.append((time.perf_counter() - start) * 1000)
    finally:
        await storage.close()
    return times


def instruct_model() -> Path:
    from tests.helpers.models import build_instruct

    folder = ROOT / "benchmarks" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    path = build_instruct(folder)
    if path is None:
        raise SystemExit("The instruct model's chunk packages (the starter extra) are not installed; give --model.")
    return path


async def engine(model: Path, chats: int) -> list[dict]:
    """New chats with memory off, then on; each row one chat's first answer."""
    import dataclasses

    from app.core.generation import GenerationSettings
    from app.core.memories import MemoryOrigin
    from app.core.paths import data_paths
    from app.core.settings import Settings, SettingsFile
    from app.library.importer import import_model_file
    from app.library.models import ModelLibrary
    from app.service.doors.chat import ChatDoor
    from app.service.doors.memory import MemoryDoor
    from app.service.doors.models import ModelDoor
    from app.service.doors.settings import SettingsDoor
    from app.service.models.client import EngineClient
    from app.service.root import Service

    paths = data_paths().ensure()
    installed = import_model_file(ModelLibrary(paths.models), model)
    generation = GenerationSettings(temperature=0.0, max_tokens=8, seed=1, context_length=CONTEXT)
    SettingsFile(paths.settings_file).save(Settings(default_model=installed.id, generation=generation))
    service = Service(history_path=paths.history_db, settings_path=paths.settings_file,
                      library=ModelLibrary(paths.models), client=EngineClient())
    chat, memory, model_door, settings = ChatDoor(service), MemoryDoor(service), ModelDoor(service), SettingsDoor(service)
    rows = []
    try:
        await service.start_up()
        if model_door.loaded is None:
            raise SystemExit(f"The model did not load: {model_door.model_detail}")
        for text in PERSON:
            await memory.add(text, MemoryOrigin.HAND)
        for on in (False, True):
            await settings.update_settings(dataclasses.replace(
                settings.settings, memory=dataclasses.replace(settings.settings.memory, enabled=on)))
            for number in range(chats):
                chat.new_conversation()
                assert chat.send(QUESTIONS[number % len(QUESTIONS)])
                await chat.wait_idle()
                answer = chat.messages[-1]
                stats = answer.stats
                assert stats is not None and not stats.error, answer
                rows.append({"memory": on, "chat": number, "cold": number == 0, "memories": len(answer.memories),
                             "engine_ttft_ms": round(stats.ttft_ms, 1), "prompt_tokens": stats.prompt_tokens,
                             "evaluated": stats.prompt_tokens_evaluated})
                print(f"memory {'on ' if on else 'off'} chat {number}: TTFT {stats.ttft_ms:,.0f} ms, prompt "
                      f"{stats.prompt_tokens:,} tokens ({stats.prompt_tokens_evaluated:,} evaluated), "
                      f"{len(answer.memories)} memories", flush=True)
    finally:
        await service.shutdown()
    return rows


def engine_summary(rows: list[dict]) -> dict:
    def median(on: bool, cold: bool, key: str) -> float:
        return statistics.median(r[key] for r in rows if r["memory"] == on and r["cold"] == cold)

    result: dict[str, Any] = {side: {kind: {key: median(side == "on", kind == "cold", key)
                            for key in ("engine_ttft_ms", "prompt_tokens", "evaluated")}
                     for kind in ("cold", "warm")} for side in ("off", "on")}
    result["added_prompt_tokens"] = result["on"]["warm"]["prompt_tokens"] - result["off"]["warm"]["prompt_tokens"]
    result["warm_ttft_on_over_off"] = round(result["on"]["warm"]["engine_ttft_ms"]
                                            / result["off"]["warm"]["engine_ttft_ms"], 3)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--chats", type=int, default=5, help="new chats on each side (the first is cold)")
    parser.add_argument("--model", type=Path, help="a GGUF instruct model (default: the starter, assembled)")
    parser.add_argument("--no-engine", action="store_true", help="time the selection only")
    parser.add_argument("--embedding-model", type=Path,
                        help="an embedding GGUF: time the hybrid selection (BM25 and vectors) too")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "memory.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["KESTREL_HOME"] = home
        chosen = selection(args.memories, args.questions, Path(home))
        hybrid = (hybrid_selection(args.memories, args.questions, Path(home), args.embedding_model)
                  if args.embedding_model else None)
        model = None if args.no_engine else (args.model or instruct_model())
        rows = asyncio.run(engine(model, args.chats)) if model is not None else []
    print(f"\nselection, budget of a {CONTEXT:,}-token context, {os.cpu_count()} CPUs")
    print(f"{'memories':>9} {'chosen':>7} {'store p50':>10} {'p95':>8} {'max':>8} {'writer p50':>11} {'p95':>8}")
    for size, row in chosen.items():
        store, writer = row["store_ms"], row["writer_thread_ms"]
        print(f"{int(size):>9,} {row['memories_chosen']:>7.0f} {store['p50']:>8.2f}ms {store['p95']:>6.2f}ms "
              f"{store['max']:>6.2f}ms {writer['p50']:>9.2f}ms {writer['p95']:>6.2f}ms")
    print(f"goal: p95 at most 10 ms at 10,000 memories (store: {chosen[str(args.memories)]['store_ms']['p95']:.2f} ms, "
          f"through the writer thread: {chosen[str(args.memories)]['writer_thread_ms']['p95']:.2f} ms)")
    if hybrid is not None:
        question, store, read = hybrid["question_vector_ms"], hybrid["store_ms"], hybrid["vectors_read_ms"]
        print(f"\nhybrid selection, {hybrid['memories']:,} memories with vectors of {hybrid['model']}")
        print(f"{'':<22} {'p50':>8} {'p95':>8} {'max':>8}")
        for name, row in (("question's vector", question), ("choice on the store", store),
                          ("vectors read again", read)):
            print(f"{name:<22} {row['p50']:>6.2f}ms {row['p95']:>6.2f}ms {row['max']:>6.2f}ms")
        print(f"an answer waits for both: p95 {question['p95'] + store['p95']:.2f} ms (the vector at most 2 s, "
              f"then BM25 alone)")
    summary = engine_summary(rows) if rows else None
    if summary is not None and model is not None:
        print(f"\nnew chats, model {model.name}, {len(PERSON)} memories, medians")
        print(f"{'memory':<7} {'chat':<5} {'prompt':>7} {'evaluated':>10} {'TTFT ms':>8}")
        for side in ("off", "on"):
            for kind in ("cold", "warm"):
                row = summary[side][kind]
                print(f"{side:<7} {kind:<5} {row['prompt_tokens']:>7,.0f} {row['evaluated']:>10,.0f} "
                      f"{row['engine_ttft_ms']:>8,.0f}")
        print(f"added prompt tokens per chat: {summary['added_prompt_tokens']:,.0f}; warm TTFT on / off: "
              f"{summary['warm_ttft_on_over_off']:.0%} (goal: within 110%)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count(), "context": CONTEXT,
                                     "selection": chosen, "hybrid_selection": hybrid,
                                     "model": model.name if model else None,
                                     "engine": summary, "rows": rows}, indent=2) + "\n", encoding="utf-8")
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
