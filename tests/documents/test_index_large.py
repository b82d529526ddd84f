"""A collection of 10,000 small files, read by the reader's real worker process, indexes, answers
searches, and a rescan of it reads nothing again."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.documents.chunks import chunk_document
from app.documents.index import DocumentIndex
from app.documents.reader_worker import read_in_worker

FILES = 10_000


@pytest.mark.slow
def test_ten_thousand_small_files(tmp_path: Path) -> None:
    folder = tmp_path / "many"
    for group in range(100):
        (folder / f"g{group:02}").mkdir(parents=True)
        for number in range(FILES // 100):
            serial = group * 100 + number
            (folder / f"g{group:02}" / f"n{number:02}.txt").write_text(
                f"note {serial} marker{serial} about birds, a small file of {serial}\n", encoding="utf-8")
    with DocumentIndex(tmp_path / "documents.sqlite3", read_in_worker, chunk_document) as index:
        index.add_collection(folder)
        outcome = index.index("many")
        assert (outcome.added, outcome.indexed, outcome.chunks, outcome.unreadable) == (FILES, FILES, FILES, 0)
        collection = index.collection("many")
        assert (collection.files, collection.chunks, collection.pending) == (FILES, FILES, 0)
        [hit] = index.search("marker7321")
        assert hit.path == folder.resolve() / "g73" / "n21.txt" and hit.text.startswith("note 7321")
        assert len(index.search("birds", limit=50)) == 50
        (folder / "g00" / "n00.txt").unlink()
        again = index.index("many")
        assert (again.added, again.changed, again.removed, again.indexed) == (0, 0, 1, 0)
