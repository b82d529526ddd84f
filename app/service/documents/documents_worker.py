"""The documents service's worker thread: the one owner of the DocumentIndex, its runs, holds and vectors."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from app.documents.collections import Collection, DocumentsError, IndexProgress, IndexUnavailable
from app.documents.index import DocumentIndex, IndexControl
from app.documents.search import Embedder
from app.service.documents_events import (CollectionInfo, CollectionsChanged, DocumentsProblem, IndexingProgress,
                                          IndexState)
from app.service.documents.documents_pace import PROGRESS_EVERY_S, Hold, Pace
from app.service.documents.embedding_turns import EmbeddingTurns
from app.service.events import Event

T = TypeVar("T")
log = logging.getLogger(__name__)
# Chunks embedded between two looks at a hold: one batch is a second or two on two cores.
EMBED_BATCH = 16


@dataclass(frozen=True)
class EmbeddingChoice:
    """The model whose vectors are made and searched: its file and the id its vectors are stored under."""

    path: Path
    model_id: str


@dataclass
class _Job:
    run: Callable[[DocumentIndex], Any]
    future: concurrent.futures.Future[Any]
    between_runs: bool  # changes files a run holds in memory: waits until no run is under way


class _RunControl(IndexControl):
    """A run's control that serves the quick jobs (a search, a listing) between two files and
    waits, still serving them, while indexing is held."""

    def __init__(self, worker: IndexWorker) -> None:
        super().__init__()
        self._worker = worker

    @property
    def paused(self) -> bool:  # the index writes what it read before it waits
        return self._worker.hold.held

    def go_on(self) -> bool:
        self._worker.serve(in_run=True)
        while self._worker.hold.held and not self.cancelled:
            self._worker.held_wait()
        return not self.cancelled


class IndexWorker:
    """One thread that opens the index, runs the collections that need work one at a time,
    fills the chosen model's vectors when nothing else waits, and serves the service's
    requests (between two files while a run goes on). Everything it says goes through `post`,
    which runs a callable on the service's event loop."""

    def __init__(self, open_index: Callable[[], DocumentIndex], emit: Callable[[Event], None],
                 post: Callable[[Callable[[], None]], None], turns: EmbeddingTurns) -> None:
        self._open_index = open_index
        self._emit_here = emit
        self._post = post
        self._turns = turns  # the model's process, shared with the API server
        self._wake = threading.Event()
        self.hold = Hold(self._wake)
        self._lock = threading.Lock()
        self._jobs: deque[_Job] = deque()
        self._todo: dict[str, None] = {}  # collections to scan and read, in order
        self._failed: set[str] = set()
        self._current: tuple[str, IndexState] | None = None
        self._control: _RunControl | None = None
        self._rows: list[Collection] = []
        self._vectors: dict[str, tuple[int, int]] = {}  # name: (chunks with vectors, chunks)
        self._choice: EmbeddingChoice | None = None
        self._embed_failed = False
        self._closed = False
        self._broken: DocumentsError | None = None  # why the index could not be opened
        self._shown_words = ""
        self._shown_infos: tuple[CollectionInfo, ...] | None = None
        self._pace = Pace()
        self._thread = threading.Thread(target=self._main, name="kestrel-documents", daemon=True)

    # --- from the event loop ----------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, run: Callable[[DocumentIndex], T], between_runs: bool = False) -> concurrent.futures.Future[T]:
        """Run `run(index)` on the worker; `between_runs`: not while a run holds files in memory."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                future.set_exception(self._broken or RuntimeError("the documents service is closed"))
                return future
            self._jobs.append(_Job(run, future, between_runs))
        self._wake.set()
        return future

    def want(self, names: list[str], first: bool = False) -> None:
        """Scan and read these collections (again); `first`: before those already waiting."""
        with self._lock:
            rest = {name: None for name in self._todo if name not in names}
            self._todo = {**dict.fromkeys(names), **rest} if first else {**self._todo, **dict.fromkeys(names)}
            self._embed_failed = False
        self._wake.set()

    def cancel_run(self, name: str) -> None:
        """Stop the run of this collection, if one goes on (a removal, a reindex waits for it)."""
        control, current = self._control, self._current
        if control is not None and current is not None and current[0] == name:
            control.cancel()

    def choose(self, choice: EmbeddingChoice | None) -> None:
        """Make and search this model's vectors from now on (None: no vectors)."""
        self.submit(lambda _index: self._set_choice(choice))

    def close(self, timeout: float = 10.0) -> None:
        """Stop the run (what was read is kept; the rest stays pending) and end the thread."""
        with self._lock:
            self._closed = True
            jobs = list(self._jobs)
            self._jobs.clear()
        for job in jobs:
            job.future.set_exception(RuntimeError("the documents service closed"))
        if self._control is not None:
            self._control.cancel()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # --- on the worker thread ---------------------------------------------------------

    def _main(self) -> None:
        try:
            index = self._open_index()
        except DocumentsError as exc:
            self._broken = exc
            self._emit(DocumentsProblem("", str(exc)))
            self._fail_jobs(exc)
            return
        self._index = index
        try:
            self.refresh()
            while not self._closed:
                self._wake.clear()
                self.serve(in_run=False)
                if self._closed:
                    break
                if self.hold.held:
                    self.held_wait()
                    continue
                name = self._next()
                if name is not None:
                    self._run(name)
                elif not self._embed_next():
                    self._publish()
                    self._wake.wait(1.0)
        finally:
            self._close_embedder()
            index.close()
            self._fail_jobs(RuntimeError("the documents service closed"))

    def serve(self, in_run: bool) -> None:
        """Run the waiting jobs (in a run: only those that leave its files alone)."""
        while True:
            with self._lock:
                job = next((j for j in self._jobs if not (in_run and j.between_runs)), None)
                if job is None:
                    return
                self._jobs.remove(job)
            if not job.future.set_running_or_notify_cancel():
                continue
            try:
                job.future.set_result(job.run(self._index))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
                job.future.set_exception(exc)

    def held_wait(self) -> None:
        """While held: say why once, serve jobs, and look again a few times a second."""
        self._publish()
        started = time.monotonic()
        self._wake.wait(PROGRESS_EVERY_S)
        self._wake.clear()
        self._pace.held_s += time.monotonic() - started
        self.serve(in_run=self._control is not None)

    def _next(self) -> str | None:
        with self._lock:
            return next(iter(self._todo), None)

    def _run(self, name: str) -> None:
        """Scan and read one collection; a folder gone or an unusable index is said, not raised."""
        control = self._control = _RunControl(self)
        self._current = (name, IndexState.SCANNING)
        self._pace = Pace()
        with self._lock:  # asked for again during the run (a rescan): another run follows
            self._todo.pop(name, None)
        self.refresh()
        folder = next((row.folder for row in self._rows if row.name == name), None)
        if folder is None:  # removed since it was asked for
            self._current = self._control = None
            return
        try:
            if not folder.is_dir():
                raise DocumentsError(f"The folder of the collection “{name}”, {folder}, is not there. Connect the "
                                     "drive it is on, or remove the collection.")
            self._index.index(name, self._progress, control)
            self._failed.discard(name)
        except IndexUnavailable as exc:
            self._failed.add(name)
            self._emit(DocumentsProblem("", str(exc)))
        except DocumentsError as exc:
            self._failed.add(name)
            self._emit(DocumentsProblem(name, str(exc)))
        except Exception as exc:  # noqa: BLE001 - the thread must outlive it: the window shows it
            log.exception("indexing %s failed", name)
            self._failed.add(name)
            self._emit(DocumentsProblem(name, f"Indexing stopped on an unexpected error ({type(exc).__name__}: "
                                              f"{exc}). The files read so far are kept; Reindex tries again."))
        finally:
            self._control = None
            self._current = None
            if control.cancelled and not self._closed:
                with self._lock:  # the files it did not reach are read next
                    self._todo = {name: None, **self._todo}
        self.refresh()

    def _progress(self, progress: IndexProgress) -> None:
        name = progress.collection
        if self._current != (name, IndexState.READING):  # the scan is over: the window says "reading"
            self._current = (name, IndexState.READING)
            self._publish(force=True)
        left = self._pace.left(progress.files_done, progress.files_total)
        last = progress.files_done == progress.files_total
        if self._pace.due() or last:
            self._emit(IndexingProgress(name, IndexState.READING, progress.files_done, progress.files_total,
                                        left, ""))
        if self._pace.counts_due():
            self.refresh()

    def _embed_next(self) -> bool:
        """Fill the chosen model's vectors of one collection that lacks some; False if none does."""
        choice = self._choice
        if choice is None or self._embed_failed:
            return False
        name = next((n for n, (done, total) in self._vectors.items() if done < total and n not in self._failed), None)
        if name is None:
            return False
        from app.documents.embedding import EmbeddingError

        done, total = self._vectors[name]
        control = self._control = _RunControl(self)
        self._current = (name, IndexState.EMBEDDING)
        self._pace = Pace()
        self._publish(force=True)

        def progress(count: int) -> None:
            left = self._pace.left(count, total - done)
            if self._pace.due() or done + count >= total:
                self._emit(IndexingProgress(name, IndexState.EMBEDDING, done + count, total, left, ""))

        try:
            embedder = self._turns.embedder_for(choice.path)
            self._index.embed_missing(choice.model_id, embedder, control, EMBED_BATCH, [name], progress)
        except EmbeddingError as exc:
            self._embed_failed = True
            self._close_embedder()
            self._emit(DocumentsProblem(name, f"{exc} The documents are found by keyword meanwhile; a rescan "
                                              "tries the vectors again."))
        except DocumentsError as exc:
            self._emit(DocumentsProblem(name, str(exc)))
            self._embed_failed = True
        except Exception as exc:  # noqa: BLE001 - as in _run
            log.exception("embedding %s failed", name)
            self._embed_failed = True
            self._close_embedder()
            self._emit(DocumentsProblem(name, f"Making vectors stopped on an unexpected error ({type(exc).__name__}: "
                                              f"{exc}). The documents are found by keyword meanwhile."))
        finally:
            self._control = None
            self._current = None
        self.refresh()
        return True

    def _set_choice(self, choice: EmbeddingChoice | None) -> None:
        if choice != self._choice:
            self._close_embedder()
            self._choice = choice
            self._embed_failed = False
            self.refresh()

    def embedder(self) -> tuple[EmbeddingChoice, Embedder] | None:
        """On the worker: the chosen model and its process (started on its first turn), None without one."""
        if self._choice is None or self._embed_failed:
            return None
        return self._choice, self._turns.embedder_for(self._choice.path)

    def _close_embedder(self) -> None:
        self._turns.release()

    def refresh(self) -> None:
        """On the worker: read the collections' counts (and vector coverage) again and say them."""
        try:
            self._rows = self._index.collections()
            self._failed &= {row.name for row in self._rows}  # a removed collection's failure goes with it
            choice = self._choice
            self._vectors = {row.name: (self._index.vector_coverage(choice.model_id, [row.name]) if choice
                                        else (0, row.chunks)) for row in self._rows}
        except DocumentsError as exc:
            self._emit(DocumentsProblem("", str(exc)))
        self._publish(force=True)

    def _publish(self, force: bool = False) -> None:
        """Say the collections and their states, when they changed (or `force`)."""
        words = self.hold.words()
        if not force and words == self._shown_words:
            return
        self._shown_words = words
        infos = tuple(self._info(row, words) for row in self._rows)
        if infos != self._shown_infos:  # listeners hear changes, not the worker's wakes
            self._shown_infos = infos
            self._emit(CollectionsChanged(infos))
        current = self._current
        if current is not None and words:
            self._emit(IndexingProgress(current[0], IndexState.PAUSED if self.hold.user else IndexState.WAITING,
                                        0, 0, None, words))

    def _info(self, row: Collection, words: str) -> CollectionInfo:
        vectors, chunks = self._vectors.get(row.name, (0, row.chunks))
        with self._lock:
            todo = row.name in self._todo
        embedding_left = self._choice is not None and not self._embed_failed and vectors < chunks
        if row.name in self._failed:
            state = IndexState.FAILED
        elif (self._current is not None and self._current[0] == row.name) or todo or embedding_left:
            if words:
                state = IndexState.PAUSED if self.hold.user else IndexState.WAITING
            elif self._current is not None and self._current[0] == row.name:
                state = self._current[1]
            else:
                state = IndexState.WAITING
        else:
            state = IndexState.IDLE
        indexed = row.files - row.unreadable - row.pending
        return CollectionInfo(row.name, row.folder, row.files, indexed, row.unreadable, row.chunks,
                              vectors if self._choice else 0, row.indexed_at, state)

    def _emit(self, event: Event) -> None:
        self._post(lambda: self._emit_here(event))

    def _fail_jobs(self, exc: BaseException) -> None:
        with self._lock:
            self._closed = True
            jobs = list(self._jobs)
            self._jobs.clear()
        for job in jobs:
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(exc)
