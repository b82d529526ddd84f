"""The documents index: indexing speed and search latency at 100,000 chunks (keyword, vector, hybrid).

    python benchmarks/documents.py [--chunks 100000] [--files 300] [--queries 60] [--json OUT]

Indexing, two ways: real files (Markdown, a few pages each) through the reader's worker
process and the real chunker, as `kestrel docs add` reads them (files/s, chunks/s); and the
index's own write speed, 1,000 generated files of 100 paragraphs each read in this process
(chunks/s: SQLite, FTS5 and the scan without the parser). Then search over those chunks:
BM25 alone, vectors alone (random 384-d unit vectors, the width of all-MiniLM-L6-v2, and a
random query vector: the cost does not depend on the values), and hybrid (both, fused),
each query timed through DocumentIndex.search. The first vector search, which reads the
vectors into memory, is timed on its own. Prints a table and writes JSON (default
benchmarks/results/documents.json). The goal: search under 50 ms p95 at 100,000 chunks.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.documents.index import DocumentIndex  # noqa: E402
from app.documents.search import SearchMode, VectorQuery  # noqa: E402
from app.documents.values import Chunk, DocumentText, FileKind, Section, Unreadable  # noqa: E402

WIDTH = 384
PARAGRAPHS_PER_FILE = 100


def vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    """Made-up words; drawn with Zipf-like weights so a few are common, as in real text."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(size)]


def paragraph(rng: random.Random, words: list[str], weights: list[float], length: int = 60) -> str:
    return " ".join(rng.choices(words, weights, k=length)) + "."


def read_in_process(paths: Sequence[Path]) -> Iterator[DocumentText | Unreadable]:
    for path in paths:
        yield DocumentText(path, FileKind.TEXT, (Section(path.read_text(encoding="utf-8"), None, None),))


def by_paragraph(document: DocumentText) -> list[Chunk]:
    texts = document.sections[0].text.split("\n\n")
    return [Chunk(text, None, None, number, len(text) // 4) for number, text in enumerate(texts)]


class RandomEmbedder:
    """A query vector of the stored width; search time does not depend on its values."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(self._rng.standard_normal(WIDTH)) for _ in texts]


def real_reading(work: Path, files: int, rng: random.Random, words: list[str], weights: list[float]) -> dict[str, float]:
    """Files through the reader's worker process and the real chunker."""
    from app.documents.chunks import chunk_document
    from app.documents.reader_worker import read_in_worker

    folder = work / "markdown"
    folder.mkdir()
    for number in range(files):
        sections = [f"## Part {part}\n\n" + "\n\n".join(paragraph(rng, words, weights) for _ in range(4))
                    for part in range(6)]
        (folder / f"doc{number:05}.md").write_text(f"# Document {number}\n\n" + "\n\n".join(sections), encoding="utf-8")
    with DocumentIndex(work / "real.sqlite3", read_in_worker, chunk_document) as index:
        index.add_collection(folder, "real")
        started = time.perf_counter()
        outcome = index.index("real")
        seconds = time.perf_counter() - started
    return {"files": outcome.indexed, "chunks": outcome.chunks, "seconds": seconds,
            "files_per_s": outcome.indexed / seconds, "chunks_per_s": outcome.chunks / seconds}


def build(work: Path, chunks: int, rng: random.Random, words: list[str],
          weights: list[float]) -> tuple[DocumentIndex, dict[str, float]]:
    folder = work / "generated"
    folder.mkdir()
    files = max(1, chunks // PARAGRAPHS_PER_FILE)
    for number in range(files):
        text = "\n\n".join(paragraph(rng, words, weights) for _ in range(PARAGRAPHS_PER_FILE))
        (folder / f"f{number:05}.txt").write_text(text, encoding="utf-8")
    index = DocumentIndex(work / "documents.sqlite3", read_in_process, by_paragraph)
    index.add_collection(folder, "generated")
    started = time.perf_counter()
    outcome = index.index("generated")
    seconds = time.perf_counter() - started
    vectors = np.random.default_rng(1).standard_normal((outcome.chunks, WIDTH)).astype(np.float32)
    started_vectors = time.perf_counter()
    offset = 0
    while batch := index.chunks_without_vectors("random-384", 2000):
        index.store_vectors("random-384", zip([chunk_id for chunk_id, _ in batch],
                                              vectors[offset:offset + len(batch)].tolist(), strict=True))
        offset += len(batch)
    vector_seconds = time.perf_counter() - started_vectors
    return index, {"chunks": outcome.chunks, "seconds": seconds, "chunks_per_s": outcome.chunks / seconds,
                   "vectors_store_s": vector_seconds,
                   "database_mb": (work / "documents.sqlite3").stat().st_size / 2**20}


def queries(rng: random.Random, words: list[str], count: int) -> list[str]:
    """One to four words each, from the common head and the rare tail alike."""
    return [" ".join(rng.choice(words[:200] if rng.random() < 0.5 else words) for _ in range(rng.randint(1, 4)))
            for _ in range(count)]


def timed(index: DocumentIndex, texts: list[str], mode: SearchMode, vectors: VectorQuery) -> dict[str, float]:
    times = []
    for text in texts:
        started = time.perf_counter()
        index.search(text, limit=10, mode=mode, vectors=vectors)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"p50_ms": statistics.median(times), "p95_ms": times[max(0, int(len(times) * 0.95) - 1)],
            "max_ms": times[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=300, help="Markdown files read through the worker")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "documents.json")
    args = parser.parse_args()
    rng = random.Random(25)
    words = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(temporary)
        reading = real_reading(work, args.files, rng, words, weights)
        index, built = build(work, args.chunks, rng, words, weights)
        with index:
            vectors = VectorQuery("random-384", RandomEmbedder(2))
            started = time.perf_counter()
            index.search("warm up", limit=10, mode=SearchMode.VECTOR, vectors=vectors)
            first_vector_ms = (time.perf_counter() - started) * 1000
            texts = queries(rng, words, args.queries)
            latency = {mode.value: timed(index, texts, mode, vectors) for mode in SearchMode}
    result = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
              "reading": reading, "index_write": built, "first_vector_search_ms": first_vector_ms,
              "search": latency, "queries": args.queries}
    print(f"Reading through the worker: {reading['files']} files, {reading['chunks']} chunks in "
          f"{reading['seconds']:.1f} s: {reading['files_per_s']:.0f} files/s, {reading['chunks_per_s']:.0f} chunks/s")
    print(f"Index writes: {built['chunks']:,} chunks in {built['seconds']:.1f} s ({built['chunks_per_s']:,.0f} chunks/s); "
          f"vectors stored in {built['vectors_store_s']:.1f} s; database {built['database_mb']:.0f} MB")
    print(f"First vector search (reads the vectors into memory): {first_vector_ms:.0f} ms")
    print(f"\n| search at {built['chunks']:,} chunks | p50 ms | p95 ms | max ms |\n| --- | ---: | ---: | ---: |")
    for mode, numbers in latency.items():
        print(f"| {mode} | {numbers['p50_ms']:.1f} | {numbers['p95_ms']:.1f} | {numbers['max_ms']:.1f} |")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nWrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
