"""A retrieval set through Kestrel's real pieces: the reader's worker, the chunker, the EmbeddingProcess and DocumentIndex.search."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.documents.chunks import chunk_document  # noqa: E402
from app.documents.embedding import EmbeddingProcess, default_threads  # noqa: E402
from app.documents.index import DocumentIndex  # noqa: E402
from app.documents.reader_worker import read_in_worker  # noqa: E402
from app.documents.search import SearchMode, VectorQuery  # noqa: E402
from benchmarks.retrieval_set import HITS_PER_QUERY, RetrievalSet, evaluate, write_documents  # noqa: E402

MODEL_PACKAGE = "all_minilm_l6_v2"
EMBED_BATCH = 64


def make_model(folder: Path) -> Path | None:
    """all-MiniLM-L6-v2 as the project's script writes it from the installed package; None without it."""
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        return None
    out = folder / "all-MiniLM-L6-v2-f16.gguf"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_embedding_gguf.py"), str(out)],
                   check=True, capture_output=True, timeout=300)
    return out


def peak_rss_bytes(pid: int | None) -> int | None:
    """The process's peak resident memory so far (Linux: VmHWM); None where it cannot be read."""
    if pid is None:
        return None
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


def measure_quality(retrieval_set: RetrievalSet, work: Path, model: Path | None,
                    threads: int | None = None) -> dict[str, Any]:
    """Index the set's documents, embed them when there is a model, and score each search mode."""
    folder = work / "documents"
    names = write_documents(retrieval_set, folder)
    result: dict[str, Any] = {"set": retrieval_set.name, "documents": len(retrieval_set.documents),
                              "queries": len(retrieval_set.queries)}
    with DocumentIndex(work / "quality.sqlite3", read_in_worker, chunk_document) as index:
        index.add_collection(folder, "quality")
        started = time.perf_counter()
        outcome = index.index("quality")
        seconds = time.perf_counter() - started
        result["indexing"] = {"files": outcome.indexed, "unreadable": outcome.unreadable,
                              "chunks": outcome.chunks, "seconds": seconds,
                              "files_per_s": outcome.indexed / seconds, "chunks_per_s": outcome.chunks / seconds}

        def hits(mode: SearchMode, vectors: VectorQuery | None) -> dict[str, float | int]:
            scores = evaluate(retrieval_set, names, lambda text: [
                hit.path for hit in index.search(text, limit=HITS_PER_QUERY, mode=mode, vectors=vectors)])
            return asdict(scores)

        result["modes"] = {SearchMode.KEYWORD.value: hits(SearchMode.KEYWORD, None)}
        if model is None:
            result["vectors_skipped"] = f"the {MODEL_PACKAGE} package is not installed and no --model was given"
            return result
        with EmbeddingProcess(model, threads=threads) as embedder:
            embedder.start()
            loaded_rss = peak_rss_bytes(embedder.pid)
            started = time.perf_counter()
            embedded = index.embed_missing(embedder.model_id, embedder, batch=EMBED_BATCH)
            embed_seconds = time.perf_counter() - started
            peak = peak_rss_bytes(embedder.pid)
            vectors = VectorQuery(embedder.model_id, embedder)
            for mode in (SearchMode.VECTOR, SearchMode.HYBRID):
                result["modes"][mode.value] = hits(mode, vectors)
            result["embedding"] = {"model": model.name, "model_id": embedder.model_id, "chunks": embedded,
                                   "seconds": embed_seconds, "chunks_per_s": embedded / embed_seconds,
                                   "threads": threads or default_threads(), "rss_after_load_mb": _mb(loaded_rss),
                                   "peak_rss_mb": _mb(peak), "last_reported_rss_mb": _mb(embedder.rss_bytes)}
    return result


def _mb(size: int | None) -> float | None:
    return None if size is None else size / 2**20
