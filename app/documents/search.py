"""Hybrid search over the index: BM25 through FTS5, exact cosine over the vectors with numpy,
merged by reciprocal rank fusion."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from app.documents.collections import Hit
from app.documents.schema import VECTORS_VERSION, loaded_path
from app.documents.values import printable

# Reciprocal rank fusion's constant (Cormack et al., 2009): 60 keeps one list's first place
# from outweighing a chunk both lists rank well.
RRF_K = 60
# Each list hands the fusion this many candidates per hit asked for (at least _MIN_CANDIDATES).
_CANDIDATES_PER_HIT = 5
_MIN_CANDIDATES = 50
# A query longer than this many words is cut: FTS5's cost grows with each OR'ed term.
_MAX_QUERY_WORDS = 64
_WORD = re.compile(r"\w+")


class SearchMode(Enum):
    KEYWORD = "keyword"
    VECTOR = "vector"
    HYBRID = "hybrid"  # keyword alone while the chosen model has no vectors here


class Embedder(Protocol):
    """Turns texts into vectors (app/documents/embedding.py runs the model in its own process)."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True)
class VectorQuery:
    """What vector search needs: the model that filled the vectors, and something to embed the query with."""

    model_id: str
    embedder: Embedder


def query_words(text: str) -> list[str]:
    """The user's words, folded, each once, at most _MAX_QUERY_WORDS."""
    return list(dict.fromkeys(word.casefold() for word in _WORD.findall(text)))[:_MAX_QUERY_WORDS]


def fts_query(text: str) -> str:
    """The user's words as an FTS5 query that matches any of them. Every word is quoted, so
    nothing typed (AND, NEAR, a quote, a `*`, `col:`) is read as FTS5 syntax."""
    return _match(query_words(text))


def _match(words: Sequence[str]) -> str:
    return " OR ".join(f'"{word}"' for word in words)


class WordCounts:
    """How many chunks hold a word, as asked of FTS5's vocabulary (a common word costs ms to
    count), kept until the number of chunks changes."""

    def __init__(self) -> None:
        self._total = -1
        self._counts: dict[str, int] = {}

    def telling(self, conn: sqlite3.Connection, words: list[str]) -> list[str]:
        """`words` without those in more than half of all chunks, when another word remains.

        FTS5's BM25 gives such a word an IDF of 1e-6 (its formula goes negative past half),
        so it moves no score; dropped, it no longer makes FTS5 score and sort nearly every
        chunk ("the", "and"): 119 ms at p95 before, at 100,000 chunks. A word whose stem
        differs from it is not found in the vocabulary and is kept, as a rare one is."""
        if len(words) < 2:
            return words
        total = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        if total != self._total:
            self._total, self._counts = total, {}
        kept = [word for word in words if self._count(conn, word) * 2 <= total]
        return kept or words

    def _count(self, conn: sqlite3.Connection, word: str) -> int:
        if word not in self._counts:
            row = conn.execute("SELECT doc FROM temp.chunks_vocab WHERE term = ?", (word,)).fetchone()
            self._counts[word] = 0 if row is None else int(row[0])
        return self._counts[word]


class VectorStore:
    """The vectors of one model as one float32 matrix in memory, read again only when the
    database says they changed (the meta counter that every write bumps)."""

    def __init__(self) -> None:
        self._loaded: tuple[str, int] | None = None
        self.chunk_ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.collection_ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.matrix: npt.NDArray[np.float32] = np.zeros((0, 0), dtype=np.float32)

    def refresh(self, conn: sqlite3.Connection, model_id: str) -> None:
        version = int(conn.execute("SELECT value FROM meta WHERE key = ?", (VECTORS_VERSION,)).fetchone()[0])
        if self._loaded == (model_id, version):
            return
        rows = conn.execute(
            "SELECT v.chunk_id, f.collection_id, v.vector FROM vectors AS v"
            " JOIN chunks AS c ON c.id = v.chunk_id JOIN files AS f ON f.id = c.file_id"
            " WHERE v.model = ?", (model_id,)).fetchall()
        self.chunk_ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        self.collection_ids = np.fromiter((row[1] for row in rows), dtype=np.int64, count=len(rows))
        blob = b"".join(row[2] for row in rows)
        width = len(rows[0][2]) // 4 if rows else 0
        self.matrix = np.frombuffer(blob, dtype="<f4").reshape(len(rows), width) if rows \
            else np.zeros((0, 0), dtype=np.float32)
        self._loaded = (model_id, version)

    def nearest(self, query: Sequence[float], collection_ids: Sequence[int] | None,
                count: int) -> list[tuple[int, float]]:
        """The `count` chunks closest to `query` by cosine (the stored vectors are unit length)."""
        if not len(self.chunk_ids):
            return []
        vector = np.asarray(query, dtype=np.float32)
        if vector.shape != (self.matrix.shape[1],):
            raise ValueError(f"the query vector has {vector.size} numbers, the stored ones {self.matrix.shape[1]}")
        vector = vector / (float(np.linalg.norm(vector)) or 1.0)
        # einsum, not `@`: a matrix-vector product is bound by memory, and OpenBLAS's threads only
        # add waits on a busy machine (2 cores: 8 ms at 5,000 chunks against einsum's 0.4 ms).
        scores = np.einsum("ij,j->i", self.matrix, vector)
        if collection_ids is not None:
            scores = np.where(np.isin(self.collection_ids, np.asarray(collection_ids, dtype=np.int64)),
                              scores, -np.inf)
        count = min(count, len(scores))
        best = np.argpartition(-scores, count - 1)[:count]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(int(self.chunk_ids[i]), float(scores[i])) for i in best if np.isfinite(scores[i])]

    def has_vectors(self, collection_ids: Sequence[int] | None) -> bool:
        if collection_ids is None:
            return bool(len(self.chunk_ids))
        return bool(np.isin(self.collection_ids, np.asarray(collection_ids, dtype=np.int64)).any())


def keyword_ranking(conn: sqlite3.Connection, counts: WordCounts, query: str,
                    collection_ids: Sequence[int] | None, count: int) -> list[tuple[int, float]]:
    """The `count` best chunks by BM25, best first, with a score where higher is better."""
    match = _match(counts.telling(conn, query_words(query)))
    if not match:
        return []
    if collection_ids is None:  # no join: joining every match before the sort tripled the time
        rows = conn.execute("SELECT rowid, bm25(chunks_fts) AS rank FROM chunks_fts WHERE chunks_fts MATCH ?"
                            " ORDER BY rank LIMIT ?", (match, count)).fetchall()
    else:
        where, params = _collection_filter(collection_ids)
        rows = conn.execute(
            "SELECT chunks_fts.rowid, bm25(chunks_fts) AS rank FROM chunks_fts"
            " JOIN chunks AS c ON c.id = chunks_fts.rowid JOIN files AS f ON f.id = c.file_id"
            f" WHERE chunks_fts MATCH ?{where} ORDER BY rank LIMIT ?", (match, *params, count)).fetchall()
    return [(int(row[0]), -float(row[1])) for row in rows]


def _collection_filter(collection_ids: Sequence[int] | None) -> tuple[str, tuple[int, ...]]:
    if collection_ids is None:
        return "", ()
    return f" AND f.collection_id IN ({','.join('?' * len(collection_ids))})", tuple(collection_ids)


def fuse(rankings: Sequence[Sequence[tuple[int, float]]], limit: int) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each chunk scores the sum of 1 / (RRF_K + rank) over the lists
    that hold it. Ranks, not scores, are added, so BM25's and cosine's scales never meet."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (chunk_id, _score) in enumerate(ranking, start=1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:limit]


def search(conn: sqlite3.Connection, store: VectorStore, counts: WordCounts, query: str,
           collection_ids: Sequence[int] | None,
           limit: int, mode: SearchMode, vectors: VectorQuery | None) -> list[Hit]:
    """The chunks that best answer `query` in the given collections (None: all)."""
    if collection_ids is not None and not collection_ids:
        return []
    candidates = max(limit * _CANDIDATES_PER_HIT, _MIN_CANDIDATES)
    nearest: list[tuple[int, float]] = []
    if mode is not SearchMode.KEYWORD and vectors is not None:
        store.refresh(conn, vectors.model_id)
        if store.has_vectors(collection_ids):
            nearest = store.nearest(vectors.embedder.embed([query])[0], collection_ids, candidates)
    if mode is SearchMode.VECTOR:
        ranked = nearest[:limit]
    elif mode is SearchMode.HYBRID and nearest:
        ranked = fuse([keyword_ranking(conn, counts, query, collection_ids, candidates), nearest], limit)
    else:
        ranked = keyword_ranking(conn, counts, query, collection_ids, limit)
    return _hits(conn, ranked)


def _hits(conn: sqlite3.Connection, ranked: list[tuple[int, float]]) -> list[Hit]:
    if not ranked:
        return []
    rows = conn.execute(
        "SELECT c.id, col.name, col.folder, f.path, c.page, c.heading, c.text FROM chunks AS c"
        " JOIN files AS f ON f.id = c.file_id JOIN collections AS col ON col.id = f.collection_id"
        f" WHERE c.id IN ({','.join('?' * len(ranked))})", [chunk_id for chunk_id, _ in ranked]).fetchall()
    by_id = {row[0]: row for row in rows}
    # A name that is not valid UTF-8 is shown with \ufffd: a hit's path goes to the user and into prompts.
    return [Hit(collection=row[1], path=Path(row[2]) / printable(loaded_path(row[3])), page=row[4], heading=row[5],
                score=score,
                text=row[6], chunk_id=chunk_id)
            for chunk_id, score in ranked if (row := by_id.get(chunk_id)) is not None]
