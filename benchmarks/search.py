"""History search: Python's casefold over every message (before) vs the FTS5 trigram index.

    python benchmarks/search.py [--messages 100000] [--conversations 400] [--runs 5] [--json OUT]

Writes a history in the first release's format (no index) with generated chats, then
times what a user with that file meets: the start-up migration that builds the index,
each query through HistoryStore.search_conversations, and the same method as it was
before the index (ScanningHistoryStore, kept here only to measure it), on the same
file and warm cache. Both sides must return the same conversations. Also times one
streaming flush (update_message of a long answer) with and without the index.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.core.store import history  # noqa: E402
from app.core.conversation import Conversation, Role  # noqa: E402
from app.core.generation import GenerationSettings  # noqa: E402
from app.core.store.history import HistoryStore  # noqa: E402
from app.core.store.history_schema import MIGRATIONS  # noqa: E402


class ScanningHistoryStore(HistoryStore):
    """A HistoryStore that searches as it did before the FTS5 index, to compare with."""

    def search_conversations(self, query: str) -> list[Conversation]:
        """Override HistoryStore.search_conversations with its code before the index."""
        rows = self._conn.execute(
            "SELECT * FROM conversations AS c"
            " WHERE instr(kestrel_fold(c.title), :q) > 0"
            " OR EXISTS (SELECT 1 FROM messages AS m WHERE m.conversation_id = c.id"
            "  AND instr(kestrel_fold(m.text), :q) > 0)"
            " ORDER BY c.updated DESC, c.id DESC",
            {"q": query.casefold()},
        ).fetchall()
        # The same conversion as the new code, so that only the search differs.
        return [history._conversation(row) for row in rows]

# (label, query): what people type into the search box. Words from the made-up tail of
# the vocabulary (see _vocabulary) cover the frequencies in between.
QUERIES = [
    ("common word", "the"),
    ("medium word", "function"),
    ("less common word", "kalomiren"),
    ("uncommon word", "tisvenoda"),
    ("rare word", "quetzal"),
    ("absent word", "xylophonist"),
    ("phrase", "for example"),
    ("2 chars, common", "ok"),
    ("2 chars, absent", "zq"),
    ("non-ASCII, German", "straße"),
    ("non-ASCII, Greek", "οδος"),
]

WORDS = (
    "the of and to a in is it you that for this with on be are as can your not or have "
    "use will if by from at an file function value code model example data we first more "
    "should when which one also each two other then return list string number error line "
    "python window memory token answer question because there here make need time new "
    "run test change set call name type class object result output input user system "
    "text read write open close start stop loop step add remove check print key path"
).split()
CODE = [
    "def main() -> int:", "    return 0", "for item in items:", "    total += item.price",
    "if __name__ == '__main__':", "import json", "x = [i * i for i in range(10)]",
]
FOREIGN = [
    "Die STRASSE ist lang und die Straße ist nass.", "Η ΟΔΟΣ είναι μακριά, ο δρόμος επίσης.",
    "İSTANBUL'da hava güzel, ıslak değil.", "Ça va? Oui, très bien, merci.",
]


def _vocabulary() -> list[str]:
    """The common words, then a long tail of made-up ones, most frequent first."""
    syllables = "ka lo mi ren tis ve no da ur pe sa gri fo lu ben tor".split()
    tail = [a + b + c for a in syllables for b in syllables for c in syllables if a != b != c]
    random.Random(0).shuffle(tail)
    # The words QUERIES names (four syllables: not in the tail by chance) sit at fixed
    # ranks, so their frequency is known.
    tail.insert(200, "kalomiren")
    tail.insert(1500, "tisvenoda")
    return WORDS + tail


def write_history(path: Path, messages: int, conversations: int, seed: int = 1) -> None:
    """A history as Kestrel's first release wrote it: chats, messages, no index."""
    rng = random.Random(seed)
    words = _vocabulary()
    # Zipf: the word of rank r comes up in proportion to 1/r, as in natural text.
    # Cumulative, so that random.choices need not sum them on every call.
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(words))))
    settings = json.dumps(GenerationSettings().to_dict())
    conn = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[0](conn)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO conversations (id, title, created, updated, settings)"
        " VALUES (?, ?, ?, ?, ?)",
        [(n, _sentence(rng, words, weights, 2, 6).capitalize(), n, n, settings)
         for n in range(1, conversations + 1)],
    )
    rows = []
    for n in range(messages):
        role = Role.USER if n % 2 == 0 else Role.ASSISTANT
        rows.append((rng.randint(1, conversations), role.value, _message_text(rng, words, weights, role),
                     1_700_000_000.0 + n))
    conn.executemany(
        "INSERT INTO messages (conversation_id, role, text, created, state)"
        " VALUES (?, ?, ?, ?, 'complete')",
        rows,
    )
    conn.execute("COMMIT")
    conn.close()


def _sentence(rng: random.Random, words: list[str], weights: list[float], low: int, high: int) -> str:
    return " ".join(rng.choices(words, cum_weights=weights, k=rng.randint(low, high)))


def _message_text(rng: random.Random, words: list[str], weights: list[float], role: Role) -> str:
    # Questions are short; answers run to a few paragraphs, some with code.
    count = rng.randint(1, 3) if role is Role.USER else rng.randint(3, 25)
    parts = [_sentence(rng, words, weights, 4, 18).capitalize() + rng.choice(".?!")
             for _ in range(count)]
    if role is Role.ASSISTANT and rng.random() < 0.2:
        parts.append("\n".join(rng.sample(CODE, 3)))
    if rng.random() < 0.02:
        parts.append(rng.choice(FOREIGN))
    if rng.random() < 0.0002:
        parts.append("The quetzal is a bird.")
    if rng.random() < 0.01:
        parts.append("OK, thanks.")
    return " ".join(parts)


def _median_ms(call: Callable[[], object], runs: int) -> float:
    call()  # warm: the first run pays for reading pages from disk
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def time_queries(path: Path, runs: int) -> list[dict]:
    results = []
    with ScanningHistoryStore(path) as old, HistoryStore(path) as store:
        for label, query in QUERIES:
            found = store.search_conversations(query)
            if old.search_conversations(query) != found:
                raise AssertionError(f"{query!r}: the index and the scan find different chats")
            with store.transaction() as conn:
                holding = conn.execute(
                    "SELECT count(*) FROM messages WHERE instr(folded, ?) > 0", (query.casefold(),)
                ).fetchone()[0]
            results.append({
                "label": label, "query": query, "messages": holding, "conversations": len(found),
                "old_ms": _median_ms(lambda: old.search_conversations(query), runs),
                "new_ms": _median_ms(lambda: store.search_conversations(query), runs),
            })
    return results


def time_flushes(path: Path, runs: int) -> dict:
    """One streaming flush: update_message with the whole answer so far (4,000 characters).

    Each commit waits for an fsync, whose time varies with whatever else the disk is
    doing, so the two sides take turns and each reports its median and 95th percentile.
    """
    bare = path.with_name("no-index.sqlite3")
    shutil.copyfile(path, bare)
    text = " ".join(["some streamed words"] * 210)
    times: dict[str, list[float]] = {"with_index": [], "without_index": []}
    with HistoryStore(path) as indexed, HistoryStore(bare) as plain:
        with plain.transaction() as conn:
            for name in ("insert", "delete", "update"):
                conn.execute(f"DROP TRIGGER message_search_{name}")
        answers = {}
        for side, store in (("with_index", indexed), ("without_index", plain)):
            conversation = store.create_conversation()
            answers[side] = (store, store.add_message(conversation.id, Role.ASSISTANT, "").id)
        for n in range(runs):
            for side, (store, message_id) in answers.items():
                start = time.perf_counter()
                store.update_message(message_id, text=f"{text} {n}")
                times[side].append((time.perf_counter() - start) * 1000)
    return {side: {"median_ms": statistics.median(values),
                   "p95_ms": statistics.quantiles(values, n=20)[-1]}
            for side, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--conversations", type=int, default=400)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "search.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kestrel-search ") as folder:
        path = Path(folder) / "history.sqlite3"
        write_history(path, args.messages, args.conversations)
        v1_bytes = path.stat().st_size
        start = time.perf_counter()
        HistoryStore(path).close()
        migrate_s = time.perf_counter() - start
        v2_bytes = path.stat().st_size
        queries = time_queries(path, args.runs)
        flush = time_flushes(path, 200)
    report = {"messages": args.messages, "conversations": args.conversations, "runs": args.runs,
              "machine": platform.platform(), "python": platform.python_version(),
              "sqlite": sqlite3.sqlite_version, "migrate_s": migrate_s,
              "file_mb": {"before": v1_bytes / 1e6, "after": v2_bytes / 1e6},
              "queries": queries, "flush": flush}
    _print_table(report)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print(f"\nwritten: {args.json}")
    return 0


def _print_table(report: dict) -> None:
    print(f"{report['messages']:,} messages in {report['conversations']} chats, SQLite "
          f"{report['sqlite']}, medians of {report['runs']} runs")
    print(f"{'query':<20} {'text':<13} {'messages':>9} {'chats':>6} {'before ms':>10} {'FTS5 ms':>9} "
          f"{'speed-up':>9}")
    for row in report["queries"]:
        print(f"{row['label']:<20} {row['query']:<13} {row['messages']:>9} {row['conversations']:>6} "
              f"{row['old_ms']:>10.1f} {row['new_ms']:>9.2f} {row['old_ms'] / row['new_ms']:>8.1f}x")
    size = report["file_mb"]
    print(f"migration to the index: {report['migrate_s']:.1f} s; file {size['before']:.0f} MB -> "
          f"{size['after']:.0f} MB")
    bare, indexed = report["flush"]["without_index"], report["flush"]["with_index"]
    print(f"streaming flush (4,000 characters, median / 95th percentile): without the index "
          f"{bare['median_ms']:.2f} / {bare['p95_ms']:.2f} ms, with it "
          f"{indexed['median_ms']:.2f} / {indexed['p95_ms']:.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
