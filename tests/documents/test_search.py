"""Search: the user's text is never FTS5 syntax, keyword alone until vectors exist, then vectors
and reciprocal rank fusion; collections filter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.documents.index import DocumentIndex
from app.documents.search import SearchMode, VectorQuery, fts_query, fuse
from tests.documents.index_fakes import WordHashEmbedder, paragraphs, read_here

HOSTILE = ['"', 'AND', 'heron OR', 'NEAR(heron otter)', 'text:heron', 'her*', '^heron', '(heron', '-heron',
           "heron\x00", "'; DROP TABLE chunks; --", "{heron}", "heron + otter", "", "   ", "…", "🙂"]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[DocumentIndex]:
    folder = tmp_path / "birds"
    folder.mkdir()
    texts = {"heron.txt": "The grey heron stands still in shallow water.\n\nHerons eat fish and frogs.",
             "otter.txt": "An otter dives for fish in the cold river.",
             "stars.txt": "Orion is a constellation visible in winter.",
             "near.txt": "AND OR NEAR are words too."}
    for name, text in texts.items():
        (folder / name).write_text(text, encoding="utf-8")
    other = tmp_path / "other"
    other.mkdir()
    (other / "fish.txt").write_text("Salmon are fish that swim upstream.", encoding="utf-8")
    with DocumentIndex(tmp_path / "documents.sqlite3", read_here, paragraphs) as opened:
        for path in (folder, other):
            opened.add_collection(path)
            opened.index(path.name)
        yield opened


def test_every_word_is_quoted() -> None:
    assert fts_query('heron AND "otter" NEAR(x) col:y *') == '"heron" OR "and" OR "otter" OR "near" OR "x" OR "col" OR "y"'
    assert fts_query("  ") == "" and fts_query("**") == ""


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_is_searched_as_words(index: DocumentIndex, text: str) -> None:
    index.search(text)  # no FTS5 syntax error, whatever was typed


def test_fts_words_are_found_as_words(index: DocumentIndex) -> None:
    assert [hit.path.name for hit in index.search("NEAR")] == ["near.txt"]


def test_keyword_search_ranks_and_filters(index: DocumentIndex) -> None:
    hits = index.search("fish heron")
    assert hits[0].path.name == "heron.txt" and hits[0].text == "Herons eat fish and frogs."
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    assert {hit.path.name for hit in hits} == {"heron.txt", "otter.txt", "fish.txt"}
    assert {hit.path.name for hit in index.search("fish", ["other"])} == {"fish.txt"}
    assert len(index.search("fish", limit=1)) == 1
    assert index.search("fish", []) == []


def test_keyword_alone_until_the_model_has_vectors_then_hybrid(index: DocumentIndex) -> None:
    embedder = WordHashEmbedder()
    query = VectorQuery("word-hash", embedder)
    keyword = index.search("winter constellation", vectors=query)
    assert embedder.calls == 0 and [hit.path.name for hit in keyword] == ["stars.txt"]
    assert index.search("winter", mode=SearchMode.VECTOR, vectors=query) == []
    done = index.embed_missing("word-hash", embedder, batch=2)
    assert done == 6 and index.chunks_without_vectors("word-hash") == []
    vector = index.search("frogs", mode=SearchMode.VECTOR, vectors=query, limit=1)
    assert [hit.path.name for hit in vector] == ["heron.txt"] and vector[0].score == pytest.approx(1 / 5 ** 0.5)  # 1 of 5 words
    hybrid = index.search("otter river", vectors=query, limit=10)
    assert hybrid[0].path.name == "otter.txt" and len(hybrid) == 6  # vectors rank every chunk
    assert hybrid[0].score > 1 / 61 > hybrid[-1].score  # the first in both lists, the last in one
    assert {hit.path.name for hit in index.search("otter", ["other"], vectors=query)} <= {"fish.txt"}


def test_new_vectors_are_seen_by_the_next_search(index: DocumentIndex) -> None:
    embedder = WordHashEmbedder()
    query = VectorQuery("word-hash", embedder)
    [(first_id, first_text)] = index.chunks_without_vectors("word-hash", limit=1)
    index.store_vectors("word-hash", [(first_id, embedder.embed([first_text])[0])])
    assert len(index.search("anything", mode=SearchMode.VECTOR, vectors=query)) == 1
    index.embed_missing("word-hash", embedder)
    assert len(index.search("anything", mode=SearchMode.VECTOR, vectors=query)) == 6
    with pytest.raises(ValueError, match="another length"):
        index.store_vectors("word-hash", [(first_id, [1.0, 2.0])])


def test_reciprocal_rank_fusion() -> None:
    fused = fuse([[(1, 9.0), (2, 8.0), (3, 7.0)], [(3, 0.9), (1, 0.8)]], limit=10)
    assert [chunk_id for chunk_id, _ in fused] == [1, 3, 2]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62) and fused[2][1] == pytest.approx(1 / 62)


def test_a_word_in_most_chunks_is_left_out_when_another_remains(tmp_path: Path) -> None:
    folder = tmp_path / "pets"
    folder.mkdir()
    for name in ("cat", "dog", "bird"):
        (folder / f"{name}.txt").write_text(f"the {name} sleeps", encoding="utf-8")
    with DocumentIndex(tmp_path / "pets.sqlite3", read_here, paragraphs) as index:
        index.add_collection(folder)
        index.index("pets")
        # "the" is in every chunk: BM25 gives it no weight, so it only made every chunk a match.
        assert [hit.path.name for hit in index.search("the dog")] == ["dog.txt"]
        assert len(index.search("the")) == 3 and len(index.search("the sleeps")) == 3
        assert [hit.path.name for hit in index.search("the dog", ["pets"])] == ["dog.txt"]
