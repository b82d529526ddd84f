"""The documents index on real SQLite: collections, scans that follow a changing folder, a killed
run resumed, pause and cancel, removal, and the user's mistakes in plain words."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from app.documents.collections import DocumentsError, FileState, IndexProgress
from app.documents.index import DocumentIndex, IndexControl, default_database
from app.documents.values import DocumentText, Unreadable
from tests.documents.index_fakes import paragraphs, read_here

ROOT = Path(__file__).resolve().parents[2]


def write(folder: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


@pytest.fixture
def index(tmp_path: Path) -> Iterator[DocumentIndex]:
    with DocumentIndex(tmp_path / "documents.sqlite3", read_here, paragraphs) as opened:
        yield opened


def hit_files(index: DocumentIndex, query: str) -> list[str]:
    return sorted({hit.path.name for hit in index.search(query)})


def test_the_database_is_one_file_in_the_data_folder(kestrel_home: Path) -> None:
    assert default_database() == kestrel_home / "data" / "documents.sqlite3"


def test_a_folder_is_indexed_and_listed_with_its_unreadable_files(index: DocumentIndex, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write(folder, {"a.txt": "The heron waits.\n\nIt fishes at dawn.", "sub/b.md": "Otters swim in the river.",
                   "bad.txt": b"\xff\xfe\x00garbage", "photo.jpg": b"\xff\xd8", ".hidden.txt": "secret heron"})
    index.add_collection(folder)
    progress: list[IndexProgress] = []
    outcome = index.index("notes", progress.append)
    assert (outcome.added, outcome.indexed, outcome.unreadable, outcome.chunks, outcome.cancelled) == (3, 2, 1, 3, False)
    assert [(p.files_done, p.files_total) for p in progress] == [(1, 3), (2, 3), (3, 3)]
    assert progress[-1].seconds_left is not None and progress[0].seconds_left is None
    [collection] = index.collections()
    assert (collection.name, collection.folder, collection.files, collection.chunks, collection.unreadable,
            collection.pending) == ("notes", folder.resolve(), 3, 3, 1, 0)
    assert collection.indexed_at is not None and collection.indexed_at <= time.time()
    states = {record.path.name: (record.state, record.reason, record.chunks) for record in index.files("notes")}
    assert states == {"a.txt": (FileState.INDEXED, "", 2), "b.md": (FileState.INDEXED, "", 1),
                      "bad.txt": (FileState.UNREADABLE, "bad.txt is not text.", 0)}
    assert hit_files(index, "heron") == ["a.txt"]  # the hidden file is not read
    [hit] = index.search("otters")
    assert (hit.collection, hit.path, hit.heading, hit.text) == ("notes", folder.resolve() / "sub" / "b.md", "b",
                                                                 "Otters swim in the river.")


def test_a_folder_that_changes_between_scans(index: DocumentIndex, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    write(folder, {"keep.txt": "kept words", "edit.txt": "old lighthouse", "drop.txt": "doomed pelican"})
    index.add_collection(folder)
    index.index("docs")
    write(folder, {"edit.txt": "new harbour text", "added.txt": "fresh kingfisher"})
    os.utime(folder / "keep.txt", ns=(1, (folder / "keep.txt").stat().st_mtime_ns))  # atime only: unchanged
    (folder / "drop.txt").unlink()
    outcome = index.index("docs")
    assert (outcome.added, outcome.changed, outcome.removed, outcome.indexed) == (1, 1, 1, 2)
    assert hit_files(index, "lighthouse") == [] and hit_files(index, "pelican") == []
    assert hit_files(index, "harbour") == ["edit.txt"] and hit_files(index, "kingfisher") == ["added.txt"]
    assert sorted(record.path.name for record in index.files("docs")) == ["added.txt", "edit.txt", "keep.txt"]
    # The same size, another modification time: read again.
    write(folder, {"keep.txt": "kept sword"})
    os.utime(folder / "keep.txt", ns=(0, 10**9))
    assert index.index("docs").changed == 1 and hit_files(index, "sword") == ["keep.txt"]
    assert index.index("docs").indexed == 0  # nothing changed: nothing read


def test_a_file_changed_or_deleted_while_the_run_reads_is_caught_by_the_next_scan(
        index: DocumentIndex, tmp_path: Path) -> None:
    folder = tmp_path / "live"
    write(folder, {f"{n}.txt": f"file{n} original" for n in range(4)})
    edits = [True]

    def reader_while_user_edits(paths: Sequence[Path]) -> Iterator[DocumentText | Unreadable]:
        for number, result in enumerate(read_here(paths)):
            yield result
            if number == 0 and edits and edits.pop():  # first run, after the scan: one file rewritten, one deleted before it is read
                write(folder, {"1.txt": "file1 rewritten at a different length"})
                os.utime(folder / "1.txt", ns=(0, 5 * 10**9))
                (folder / "3.txt").unlink()

    with DocumentIndex(tmp_path / "live.sqlite3", reader_while_user_edits, paragraphs) as live:
        live.add_collection(folder)
        first = live.index("live")
        assert (first.indexed, first.unreadable) == (3, 1)  # 3.txt was gone when its turn came
        second = live.index("live")
        assert (second.changed, second.removed, second.indexed) == (1, 1, 1)
        assert sorted({hit.path.name for hit in live.search("rewritten")}) == ["1.txt"]
        assert [record.state for record in live.files("live")] == [FileState.INDEXED] * 3


KILLED_RUN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from app.documents.index import DocumentIndex
    from tests.documents.index_fakes import paragraphs, read_here

    def slow(paths):
        for result in read_here(paths):
            time.sleep(0.01)
            yield result

    with DocumentIndex(Path(sys.argv[1]), slow, paragraphs) as index:
        index.add_collection(Path(sys.argv[2]), "big")
        index.index("big")
""")


def test_a_killed_run_is_resumed_where_it_stopped(tmp_path: Path) -> None:
    folder, database = tmp_path / "big", tmp_path / "documents.sqlite3"
    write(folder, {f"f{n:03}.txt": f"paragraph {n} about cormorants" for n in range(300)})
    run = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(database), str(folder)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while indexed_files(database) == 0:
            assert run.poll() is None and time.monotonic() < deadline, "the run ended before it was killed"
            time.sleep(0.05)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    asked: list[Path] = []

    def counting(paths: Sequence[Path]) -> Iterator[DocumentText | Unreadable]:
        asked.extend(paths)
        return read_here(paths)

    with DocumentIndex(database, counting, paragraphs) as index:
        before = index.collection("big")
        assert 0 < before.pending < 300 and before.indexed_at is None
        outcome = index.index("big")
        assert len(asked) == before.pending == outcome.indexed and outcome.added == 0
        after = index.collection("big")
        assert (after.files, after.chunks, after.pending) == (300, 300, 0) and after.indexed_at is not None
        assert len(index.search("cormorants", limit=1000)) == 300  # no chunk twice


def indexed_files(database: Path) -> int:
    try:
        conn = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)
        try:
            return int(conn.execute("SELECT count(*) FROM files WHERE state = 'indexed'").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def test_a_run_pauses_and_cancels_between_files(index: DocumentIndex, tmp_path: Path) -> None:
    folder = tmp_path / "many"
    write(folder, {f"{n:02}.txt": f"grebe {n}" for n in range(20)})
    index.add_collection(folder)
    control = IndexControl()
    seen: list[int] = []

    def on_progress(progress: IndexProgress) -> None:
        seen.append(progress.files_done)
        if progress.files_done == 5:
            control.cancel()

    outcome = index.index("many", on_progress, control)
    assert outcome.cancelled and outcome.indexed == 5 and seen == [1, 2, 3, 4, 5]
    assert index.collection("many").pending == 15 and index.collection("many").indexed_at is None
    paused = IndexControl()
    paused.pause()
    run = threading.Thread(target=index.index, args=("many", None, paused))
    run.start()
    time.sleep(0.3)
    assert run.is_alive() and paused.paused
    assert indexed_files(index.path) == 6  # the file read before the pause is written, not held
    paused.resume()
    run.join(10)
    assert not run.is_alive() and index.collection("many").pending == 0


def test_removing_a_collection_drops_its_chunks_and_vectors_not_its_files(index: DocumentIndex, tmp_path: Path) -> None:
    write(tmp_path / "one", {"a.txt": "shared puffin"})
    write(tmp_path / "two", {"b.txt": "shared puffin too"})
    for name in ("one", "two"):
        index.add_collection(tmp_path / name)
        index.index(name)
    index.store_vectors("m", [(chunk_id, [1.0, 0.0]) for chunk_id, _ in index.chunks_without_vectors("m")])
    index.remove_collection("one")
    assert [collection.name for collection in index.collections()] == ["two"]
    assert hit_files(index, "puffin") == ["b.txt"] and (tmp_path / "one" / "a.txt").exists()
    conn = sqlite3.connect(index.path)
    assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'puffin'").fetchone()[0] == 1
    conn.close()


def test_mistakes_are_said_in_plain_words(index: DocumentIndex, tmp_path: Path) -> None:
    with pytest.raises(DocumentsError, match="does not exist"):
        index.add_collection(tmp_path / "nowhere")
    write(tmp_path, {"file.txt": "x"})
    with pytest.raises(DocumentsError, match="is not a folder"):
        index.add_collection(tmp_path / "file.txt")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    index.add_collection(tmp_path / "a", "work")
    with pytest.raises(DocumentsError, match="already the collection 'work'"):
        index.add_collection(tmp_path / "a", "other")
    with pytest.raises(DocumentsError, match="already a collection named 'work'.*--name"):
        index.add_collection(tmp_path / "b", "WORK")
    with pytest.raises(DocumentsError, match="cannot name a collection"):
        index.add_collection(tmp_path / "b", "bad\nname")
    with pytest.raises(DocumentsError, match=r"no collection named 'play' \(the collections: work\)"):
        index.index("play")
    (tmp_path / "a").rmdir()
    with pytest.raises(DocumentsError, match="is not there. Connect the drive"):
        index.index("work")


def test_a_database_from_a_newer_kestrel_is_refused(tmp_path: Path) -> None:
    database = tmp_path / "documents.sqlite3"
    conn = sqlite3.connect(database)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(DocumentsError, match="newer Kestrel"):
        DocumentIndex(database, read_here, paragraphs)


def test_a_damaged_database_is_said_in_plain_words(tmp_path: Path) -> None:
    database = tmp_path / "documents.sqlite3"
    database.write_bytes(b"this is not a database" * 100)
    with pytest.raises(DocumentsError, match="not a documents index Kestrel can read"):
        DocumentIndex(database, read_here, paragraphs)
