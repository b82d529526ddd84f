"""A retrieval test set in the BEIR layout, written out as files and scored through the real DocumentIndex.

BEIR's layout (Thakur et al., 2021) is what SciFact, NFCorpus, FiQA, ArguAna and the other
public sets are distributed in: a folder with corpus.jsonl ({"_id", "title", "text"} a line),
queries.jsonl ({"_id", "text"} a line) and qrels/<split>.tsv (query-id, corpus-id, score,
after a header line; a score above 0 is relevant). Kestrel searches files, not records, so
each document becomes one Markdown file ("# title" and its text) in a folder that is added
as a collection, read by the reader's worker process and cut by the real chunker.

The scores are per document, as the judgements are: the index returns chunks, and a
document's rank is the rank of its first chunk among the hits (the later chunks of a
document already seen are skipped). recall@5 is the share of a query's relevant documents
among the first five documents; MRR@10 is the mean of 1 / the rank of the first relevant
document, 0 when none is among the first ten.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

RECALL_AT = 5
MRR_AT = 10
# Chunks asked of the index per query: enough for ten distinct documents when documents
# have a few chunks each.
HITS_PER_QUERY = 60


@dataclass(frozen=True)
class RetrievalSet:
    """Documents (id -> (title, text)), queries (id -> text) and, per query, its relevant document ids."""

    name: str
    documents: Mapping[str, tuple[str, str]]
    queries: Mapping[str, str]
    relevant: Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class Scores:
    """Means over the queries of one search mode."""

    queries: int
    recall_at_5: float
    mrr_at_10: float
    # Per query: the rank of its first relevant document among the documents found, 0 if none.
    first_relevant: Mapping[str, int]


def load_beir(folder: Path, split: str = "test", limit: int | None = None) -> RetrievalSet:
    """The queries of `split` that have a relevant document (the first `limit` by id, if given)
    and the whole corpus: a sample of queries keeps every distractor document."""
    documents: dict[str, tuple[str, str]] = {}
    with (folder / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                record = json.loads(line)
                documents[str(record["_id"])] = (str(record.get("title") or ""), str(record["text"]))
    texts: dict[str, str] = {}
    with (folder / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                record = json.loads(line)
                texts[str(record["_id"])] = str(record["text"])
    relevant: dict[str, set[str]] = {}
    with (folder / "qrels" / f"{split}.tsv").open(encoding="utf-8", newline="") as table:
        rows = csv.reader(table, delimiter="\t")
        next(rows, None)  # the header line
        for row in rows:
            query_id, document_id, score = row[0], row[1], int(row[2])
            if score > 0 and document_id in documents:
                relevant.setdefault(query_id, set()).add(document_id)
    chosen = sorted(query_id for query_id in relevant if query_id in texts)[:limit]
    return RetrievalSet(folder.name, documents, {query_id: texts[query_id] for query_id in chosen},
                        {query_id: frozenset(relevant[query_id]) for query_id in chosen})


def write_documents(retrieval_set: RetrievalSet, folder: Path) -> dict[str, str]:
    """One Markdown file per document; returns file name -> document id (ids may hold any character)."""
    folder.mkdir(parents=True, exist_ok=True)
    names: dict[str, str] = {}
    for number, (document_id, (title, text)) in enumerate(sorted(retrieval_set.documents.items())):
        name = f"doc{number:06}.md"
        heading = f"# {title.strip()}\n\n" if title.strip() else ""
        (folder / name).write_text(heading + text.strip() + "\n", encoding="utf-8")
        names[name] = document_id
    return names


def ranked_documents(paths: Sequence[Path], names: Mapping[str, str]) -> list[str]:
    """The documents of a list of chunk hits, in the order of their first chunk."""
    seen: list[str] = []
    for path in paths:
        document_id = names[path.name]
        if document_id not in seen:
            seen.append(document_id)
    return seen


def score_query(ranked: Sequence[str], relevant: frozenset[str]) -> tuple[float, float]:
    """(recall@5, reciprocal rank within the first 10) of one query's ranked documents."""
    recall = len(relevant.intersection(ranked[:RECALL_AT])) / len(relevant)
    reciprocal = next((1.0 / rank for rank, document_id in enumerate(ranked[:MRR_AT], start=1)
                       if document_id in relevant), 0.0)
    return recall, reciprocal


def evaluate(retrieval_set: RetrievalSet, names: Mapping[str, str],
             search: Callable[[str], Sequence[Path]]) -> Scores:
    """Run every query through `search` (the paths of its chunk hits, best first) and average."""
    recalls: list[float] = []
    reciprocals: list[float] = []
    first: dict[str, int] = {}
    for query_id, text in retrieval_set.queries.items():
        ranked = ranked_documents(search(text), names)
        recall, reciprocal = score_query(ranked, retrieval_set.relevant[query_id])
        recalls.append(recall)
        reciprocals.append(reciprocal)
        first[query_id] = next((rank for rank, document_id in enumerate(ranked, start=1)
                                if document_id in retrieval_set.relevant[query_id]), 0)
    count = len(recalls)
    return Scores(count, sum(recalls) / count if count else 0.0, sum(reciprocals) / count if count else 0.0, first)
