"""The documents index: collections of folders, kept current by scans, searched by words and vectors."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from app.core.paths import data_paths
from app.documents.collections import (
    Collection,
    DocumentsError,
    FileRecord,
    FileState,
    Hit,
    IndexOutcome,
    IndexProgress,
)
from app.documents.scan import FoundFile, scan_folder
from app.documents.schema import loaded_path, open_database, plain_errors, stored_path, transaction
from app.documents.search import Embedder, SearchMode, VectorQuery, VectorStore, WordCounts, search
from app.documents.values import Chunk, DocumentText, FolderFiles, Unreadable, UnreadableCause, printable

DATABASE_NAME = "documents.sqlite3"
# How long the writes of a run may wait before they are committed: a killed run loses at
# most this much work (those files stay pending and are read again), and fewer commits
# keep 10,000 small files fast.
_COMMIT_EVERY_S = 0.5
# The pace of a few files says nothing about the rest; no time left is shown before this.
_ESTIMATE_AFTER_FILES = 3
_MAX_NAME = 100

ReadFiles = Callable[[Sequence[Path]], Iterator[DocumentText | Unreadable]]
ChunkDocument = Callable[[DocumentText], Sequence[Chunk]]


def default_database() -> Path:
    """One file beside the chat history (docs/design.md says why one for all collections)."""
    return data_paths().data / DATABASE_NAME


class IndexControl:
    """Pause, resume and cancel a run from another thread (the window's button, an answer that
    starts streaming). The run looks between two files."""

    def __init__(self) -> None:
        self._running = threading.Event()
        self._running.set()
        self._cancelled = threading.Event()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def cancel(self) -> None:
        self._cancelled.set()
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def go_on(self) -> bool:
        """Wait while paused; False once cancelled."""
        self._running.wait()
        return not self._cancelled.is_set()


class DocumentIndex:
    """The database of every collection. One object writes at a time (one thread); another
    process's writer waits for it (BEGIN IMMEDIATE with a timeout)."""

    def __init__(self, path: Path, read: ReadFiles, chunk: ChunkDocument) -> None:
        self.path = path
        self._read = read
        self._chunk = chunk
        self._conn = open_database(path)
        self._vectors = VectorStore()
        self._word_counts = WordCounts()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> DocumentIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- collections --------------------------------------------------------------

    def add_collection(self, folder: Path, name: str | None = None) -> Collection:
        """Add `folder` as a collection (not yet indexed: `index` reads it)."""
        folder = folder.expanduser().resolve()
        if not folder.is_dir():
            what = "is not a folder" if folder.exists() else "does not exist"
            raise DocumentsError(f"{printable(str(folder))} {what}. Give the folder whose documents to add.")
        if printable(str(folder)) != str(folder):
            raise DocumentsError(f"The path of {printable(str(folder))} holds bytes that are not valid text (shown as "
                                 "\ufffd), and Kestrel keeps a collection's folder by its name. Rename the folder "
                                 "(or the one it is in), then add it again.")
        name = (name if name is not None else folder.name or str(folder)).strip()
        if not name or len(name) > _MAX_NAME or not name.isprintable():
            raise DocumentsError(f"{name!r} cannot name a collection: give a name of 1 to {_MAX_NAME} "
                                 "printable characters with --name.")
        with plain_errors(self.path):
            taken = self._conn.execute("SELECT name, folder FROM collections WHERE name = ? OR folder = ?",
                                       (name, str(folder))).fetchone()
            if taken is not None and taken[1] == str(folder):
                raise DocumentsError(f"{folder} is already the collection {taken[0]!r}. To read it again: "
                                     f"kestrel docs reindex {taken[0]}")
            if taken is not None:
                raise DocumentsError(f"There is already a collection named {taken[0]!r} (of {taken[1]}). "
                                     "Choose another name with --name.")
            with transaction(self._conn):
                self._conn.execute("INSERT INTO collections (name, folder, created) VALUES (?, ?, ?)",
                                   (name, str(folder), time.time()))
        return self.collection(name)

    def remove_collection(self, name: str) -> None:
        """Drop a collection and everything indexed from it (its folder is never touched)."""
        collection_id = self._collection_id(name)
        with plain_errors(self.path), transaction(self._conn):
            self._conn.execute("DELETE FROM collections WHERE id = ?", (collection_id,))

    def collections(self) -> list[Collection]:
        with plain_errors(self.path):
            rows = self._conn.execute(
                "SELECT col.name, col.folder, col.indexed_at, count(f.id),"
                " coalesce(sum(f.chunks), 0), count(CASE WHEN f.state = ? THEN 1 END),"
                " count(CASE WHEN f.state = ? THEN 1 END)"
                " FROM collections AS col LEFT JOIN files AS f ON f.collection_id = col.id"
                " GROUP BY col.id ORDER BY col.name COLLATE NOCASE",
                (FileState.UNREADABLE.value, FileState.PENDING.value)).fetchall()
        return [Collection(name=row[0], folder=Path(row[1]), indexed_at=row[2], files=row[3], chunks=row[4],
                           unreadable=row[5], pending=row[6]) for row in rows]

    def collection(self, name: str) -> Collection:
        for collection in self.collections():
            if collection.name.casefold() == name.casefold():
                return collection
        raise self._no_such(name)

    def files(self, name: str) -> list[FileRecord]:
        collection_id = self._collection_id(name)
        with plain_errors(self.path):
            rows = self._conn.execute(
                "SELECT col.folder, f.path, f.size, f.mtime_ns, f.state, f.reason, f.chunks FROM files AS f"
                " JOIN collections AS col ON col.id = f.collection_id WHERE col.id = ? ORDER BY f.path",
                (collection_id,)).fetchall()
        # A name that is not valid UTF-8 is shown with \ufffd: the record is for the user to read.
        return [FileRecord(path=Path(row[0]) / printable(loaded_path(row[1])), size=row[2], mtime_ns=row[3],
                           state=FileState(row[4]), reason=row[5], chunks=row[6]) for row in rows]

    def mark_pending(self, name: str) -> int:
        """Have the next run read every file of the collection again, not only the changed ones
        (the user's Reindex: a file the reader refused may read now). Returns how many."""
        collection_id = self._collection_id(name)
        with plain_errors(self.path), transaction(self._conn):
            cursor = self._conn.execute("UPDATE files SET state = ? WHERE collection_id = ?",
                                        (FileState.PENDING.value, collection_id))
            return max(cursor.rowcount, 0)

    def _collection_id(self, name: str) -> int:
        if printable(name) != name:  # no collection has such a name, and SQLite takes no lone surrogate
            raise self._no_such(name)
        with plain_errors(self.path):
            row = self._conn.execute("SELECT id FROM collections WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise self._no_such(name)
        return int(row[0])

    def _no_such(self, name: str) -> DocumentsError:
        names = ", ".join(collection.name for collection in self.collections()) or "none yet"
        return DocumentsError(f"There is no collection named {name!r} (the collections: {names}). "
                              "See them with: kestrel docs list")

    # --- indexing -----------------------------------------------------------------

    def index(self, name: str, on_progress: Callable[[IndexProgress], None] | None = None,
              control: IndexControl | None = None) -> IndexOutcome:
        """Bring a collection up to date with its folder: scan, drop what is gone, read what is new
        or changed (by size and modification time) and what a killed run left pending."""
        control = control or IndexControl()
        collection_id = self._collection_id(name)
        folder = self.collection(name).folder
        if not folder.is_dir():
            # Not "every file was deleted": an unplugged drive must not empty the index.
            raise DocumentsError(f"The folder of the collection {name!r}, {folder}, is not there. Connect "
                                 f"the drive it is on, or remove the collection: kestrel docs remove {name}")
        found = scan_folder(folder, lambda: control.cancelled)
        if control.cancelled:  # a half-done scan would read as files deleted
            return IndexOutcome(name, 0, 0, 0, 0, 0, 0, cancelled=True)
        with plain_errors(self.path):
            added, changed, removed = self._apply_scan(collection_id, found)
            indexed, unreadable, chunks, finished = self._read_pending(name, collection_id, folder,
                                                                       on_progress, control)
            if finished:
                with transaction(self._conn):
                    self._conn.execute("UPDATE collections SET indexed_at = ? WHERE id = ?",
                                       (time.time(), collection_id))
        return IndexOutcome(name, added, changed, removed, indexed, unreadable, chunks, cancelled=not finished)

    def _apply_scan(self, collection_id: int, found: dict[str, FoundFile]) -> tuple[int, int, int]:
        """Record what the scan found: new and changed files pending, gone ones dropped, and the
        skipped ones (links out of the folder) unreadable with their reason, never pending."""
        known = {loaded_path(row[1]): row for row in self._conn.execute(
            "SELECT id, path, size, mtime_ns FROM files WHERE collection_id = ?", (collection_id,))}
        new = [file for path, file in found.items() if path not in known]
        changed = [(file, known[path][0]) for path, file in found.items()
                   if path in known and (known[path][2], known[path][3]) != (file.size, file.mtime_ns)]
        gone = [row[0] for path, row in known.items() if path not in found]
        with transaction(self._conn):
            self._conn.executemany(
                "INSERT INTO files (collection_id, path, size, mtime_ns, state) VALUES (?, ?, ?, ?, ?)",
                [(collection_id, stored_path(f.relative), f.size, f.mtime_ns, FileState.PENDING.value) for f in new])
            self._conn.executemany("UPDATE files SET size = ?, mtime_ns = ?, state = ? WHERE id = ?",
                                   [(f.size, f.mtime_ns, FileState.PENDING.value, file_id)
                                    for f, file_id in changed])
            self._conn.executemany("DELETE FROM files WHERE id = ?", [(file_id,) for file_id in gone])
            skipped = [(FileState.UNREADABLE.value, printable(f.skipped), UnreadableCause.OUTSIDE_FOLDER.value,
                        collection_id, stored_path(f.relative)) for f in found.values() if f.skipped]
            # Every scan: a file that became a link out loses its chunks, and Reindex's pending is undone.
            self._conn.executemany("DELETE FROM chunks WHERE file_id IN (SELECT id FROM files WHERE"
                                   " collection_id = ? AND path = ?)", [row[3:] for row in skipped])
            self._conn.executemany("UPDATE files SET state = ?, reason = ?, cause = ?, chunks = 0"
                                   " WHERE collection_id = ? AND path = ?", skipped)
        return len(new), len(changed), len(gone)

    def _read_pending(self, name: str, collection_id: int, folder: Path,
                      on_progress: Callable[[IndexProgress], None] | None,
                      control: IndexControl) -> tuple[int, int, int, bool]:
        """Read every pending file through the reader; returns (indexed, unreadable, chunks, finished).

        Results wait in memory and are written together every _COMMIT_EVERY_S, so no write
        transaction stays open while the reader works on a slow file or the run is paused."""
        pending = {str(folder / loaded_path(row[1])): int(row[0]) for row in self._conn.execute(
            "SELECT id, path FROM files WHERE collection_id = ? AND state = ? ORDER BY path",
            (collection_id, FileState.PENDING.value))}
        started, done, indexed, unreadable, chunk_count = time.monotonic(), 0, 0, 0, 0
        waiting: list[tuple[int, DocumentText | Unreadable, list[Chunk]]] = []
        written = time.monotonic()
        # FolderFiles: the reader follows a link only inside the folder, checked again as it opens.
        results = self._read(FolderFiles(folder, [Path(path) for path in pending]))
        try:
            for result in results:
                file_id = pending.get(str(result.path))
                if file_id is None:
                    raise ValueError(f"the reader returned {result.path}, which it was not asked for")
                chunks = list(self._chunk(result)) if isinstance(result, DocumentText) else []
                waiting.append((file_id, result, chunks))
                done += 1
                indexed += isinstance(result, DocumentText)
                unreadable += isinstance(result, Unreadable)
                chunk_count += len(chunks)
                if on_progress is not None:
                    on_progress(_progress(name, done, len(pending), chunk_count, unreadable, started))
                # Written before a pause too: a paused run holds nothing that a kill would lose.
                if time.monotonic() - written > _COMMIT_EVERY_S or control.paused or control.cancelled:
                    self._write(waiting)
                    written = time.monotonic()
                if not control.go_on():
                    break
            self._write(waiting)
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()  # a generator over the reader's worker ends the worker
        return indexed, unreadable, chunk_count, not control.cancelled and done == len(pending)

    def _write(self, waiting: list[tuple[int, DocumentText | Unreadable, list[Chunk]]]) -> None:
        """Store the files read so far in one transaction and empty `waiting`."""
        with transaction(self._conn):
            for file_id, result, chunks in waiting:
                self._conn.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))
                # printable: SQLite takes no lone surrogate, whether from a name or a parser's text.
                if isinstance(result, Unreadable):
                    self._conn.execute("UPDATE files SET state = ?, reason = ?, cause = ?, chunks = 0 WHERE id = ?",
                                       (FileState.UNREADABLE.value, printable(result.reason), result.cause.value,
                                        file_id))
                    continue
                self._conn.executemany(
                    "INSERT INTO chunks (file_id, ordinal, page, heading, text) VALUES (?, ?, ?, ?, ?)",
                    [(file_id, chunk.ordinal, chunk.page, None if chunk.heading is None else printable(chunk.heading),
                      printable(chunk.text)) for chunk in chunks])
                self._conn.execute("UPDATE files SET state = ?, reason = ?, cause = NULL, chunks = ? WHERE id = ?",
                                   (FileState.INDEXED.value, printable(result.note), len(chunks), file_id))
        waiting.clear()

    # --- vectors ------------------------------------------------------------------

    def chunks_without_vectors(self, model_id: str, limit: int = 256,
                               collections: Sequence[str] | None = None) -> list[tuple[int, str]]:
        """Up to `limit` chunks (id, text) that `model_id` has not embedded yet (of these
        collections; None: all), for the embedder."""
        where, params = self._in_collections(collections)
        with plain_errors(self.path):
            rows = self._conn.execute(
                "SELECT c.id, c.text FROM chunks AS c JOIN files AS f ON f.id = c.file_id WHERE NOT EXISTS"
                f" (SELECT 1 FROM vectors AS v WHERE v.model = ? AND v.chunk_id = c.id){where} ORDER BY c.id LIMIT ?",
                (model_id, *params, limit)).fetchall()
        return [(int(row[0]), str(row[1])) for row in rows]

    def vector_coverage(self, model_id: str, collections: Sequence[str] | None = None) -> tuple[int, int]:
        """(chunks `model_id` has embedded, all chunks) of these collections (None: all)."""
        where, params = self._in_collections(collections)
        with plain_errors(self.path):
            row = self._conn.execute(
                "SELECT count(v.chunk_id), count(*) FROM chunks AS c JOIN files AS f ON f.id = c.file_id"
                f" LEFT JOIN vectors AS v ON v.chunk_id = c.id AND v.model = ? WHERE 1{where}",
                (model_id, *params)).fetchone()
        return int(row[0]), int(row[1])

    def _in_collections(self, collections: Sequence[str] | None) -> tuple[str, tuple[int, ...]]:
        """A filter on `f.collection_id` for these collections' names (None: no filter)."""
        if collections is None:
            return "", ()
        ids = tuple(sorted({self._collection_id(name) for name in collections}))
        return f" AND f.collection_id IN ({','.join('?' * len(ids)) or 'NULL'})", ids

    def store_vectors(self, model_id: str, vectors: Iterable[tuple[int, Sequence[float]]]) -> int:
        """Keep `model_id`'s vectors of these chunks, scaled to unit length; a chunk deleted since
        it was handed out is skipped. Returns how many were kept."""
        rows = []
        for chunk_id, vector in vectors:
            array = np.asarray(vector, dtype="<f4")
            norm = float(np.linalg.norm(array))
            rows.append((model_id, chunk_id, (array / norm if norm else array).astype("<f4").tobytes()))
        with plain_errors(self.path):
            width = self._conn.execute("SELECT length(vector) FROM vectors WHERE model = ? LIMIT 1",
                                       (model_id,)).fetchone()
            if width is not None and any(len(row[2]) != width[0] for row in rows):
                raise ValueError(f"{model_id} gave vectors of another length than those stored")
            with transaction(self._conn):
                cursor = self._conn.executemany(
                    "INSERT OR REPLACE INTO vectors (model, chunk_id, vector)"
                    " SELECT ?, id, ? FROM chunks WHERE id = ?", [(m, blob, c) for m, c, blob in rows])
                return max(cursor.rowcount, 0)

    def embed_missing(self, model_id: str, embedder: Embedder,
                      control: IndexControl | None = None, batch: int = 64,
                      collections: Sequence[str] | None = None,
                      on_progress: Callable[[int], None] | None = None) -> int:
        """Embed every chunk the model has not (of these collections; None: all), a batch at a
        time, each batch stored before the next is asked for, so an interrupted run keeps its
        work; on_progress gets the count so far. Returns how many were embedded."""
        control = control or IndexControl()
        total = 0
        while control.go_on():
            todo = self.chunks_without_vectors(model_id, batch, collections)
            if not todo:
                break
            vectors = embedder.embed([text for _, text in todo])
            stored = self.store_vectors(model_id, zip([chunk_id for chunk_id, _ in todo], vectors, strict=True))
            total += stored
            if on_progress is not None:
                on_progress(total)
            if not stored:
                break  # every chunk of the batch was deleted meanwhile; the next run picks up the rest
        return total

    # --- search -------------------------------------------------------------------

    def search(self, query: str, collections: Sequence[str] | None = None, limit: int = 10,
               mode: SearchMode = SearchMode.HYBRID, vectors: VectorQuery | None = None) -> list[Hit]:
        """The chunks that best answer `query`: keyword alone until `vectors`' model has filled vectors."""
        if limit < 1:
            raise ValueError("a search asks for at least one hit")
        ids = None if collections is None else sorted({self._collection_id(name) for name in collections})
        with plain_errors(self.path):
            if ids is not None and len(ids) == self._conn.execute("SELECT count(*) FROM collections").fetchone()[0]:
                ids = None  # every collection: the faster search without a filter
            return search(self._conn, self._vectors, self._word_counts, query, ids, limit, mode, vectors)


def _progress(name: str, done: int, total: int, chunks: int, unreadable: int, started: float) -> IndexProgress:
    elapsed = time.monotonic() - started
    left = elapsed / done * (total - done) if done >= _ESTIMATE_AFTER_FILES else None
    return IndexProgress(name, done, total, chunks, unreadable, elapsed, left)
