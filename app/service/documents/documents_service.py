"""DocumentsService: the window's collections, indexed in the background, rescanned, paused, searched."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from app.core.settings import Settings
from app.documents.collections import DocumentsError, Hit
from app.hardware.power import Power
from app.library.model_files.gguf_info import ModelFileError
from app.library.installed import InstalledModel
from app.library.model_files.model_purpose import ModelPurpose
from app.library.models import ModelLibrary
from app.service.documents.embedding_turns import EmbeddingTurns
from app.service.documents_events import (CollectionInfo, CollectionsChanged, DocumentsProblem, FileInfo, IndexState,
                                          hold_words)
from app.service.events import (AnswerFinished, AnswerInterrupted, AnswerStarted, Event, LibraryListed,
                                ServingChanged)

if TYPE_CHECKING:  # numpy and the index come with the worker: imported when the service starts
    import numpy as np
    import numpy.typing as npt

    from app.documents.index import DocumentIndex, ReadFiles
    from app.documents.reader_worker import ReaderPool
    from app.documents.search import Embedder
    from app.service.documents.documents_worker import EmbeddingChoice, IndexWorker

T = TypeVar("T")
log = logging.getLogger(__name__)
RESCAN_EVERY_S = 600.0
POWER_EVERY_S = 60.0
SHOWN_RESCAN_AFTER_S = 60.0
MAX_NAME = 100  # as the index allows


class DocumentsService:
    """Owns the documents index for the window: one worker thread uses it (documents_worker.py),
    files are read in the reader's child process, vectors made in the embedding model's.

    Everything here is called on the event loop and returns at once or awaits the worker;
    the worker says what happens through `emit` (CollectionsChanged, IndexingProgress,
    DocumentsProblem), on the loop. Indexing waits (between two files) while the user paused
    it, while an answer streams (`set_answering`, or `hear` the answer events) and while the
    machine saves power (`set_saving_power`, or polled with `read_power`)."""

    def __init__(self, emit: Callable[[Event], None], *, library: ModelLibrary | None = None,
                 settings: Callable[[], Settings] = Settings, save_settings: Callable[[Settings], Awaitable[None]]
                 | None = None, database: Path | None = None, read: ReadFiles | None = None,
                 embedder: Callable[[Path], Embedder] | None = None,
                 read_power: Callable[[], Power] | None = None) -> None:
        """`database`: None for the one the CLI uses (default_database(), read at start);
        `read`: None for the reader's child process; `embedder`: None for EmbeddingProcess;
        `read_power`: polled every minute (None: only set_saving_power says it)."""
        self._emit = emit
        self._library = library
        self._settings = settings
        self._save_settings = save_settings
        self._database = database
        self._read = read
        self._embedder = embedder
        # The model's process, shared by indexing, search and the API server's /v1/embeddings.
        self._turns = EmbeddingTurns(self._make_embedder)
        self._read_power = read_power
        self._infos: tuple[CollectionInfo, ...] = ()
        self._model: InstalledModel | None = None
        self._worker: IndexWorker | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._polled: Power | None = None
        self._rescanned = 0.0
        self._pool: ReaderPool | None = None
        self._hold: dict[str, bool] = {}
        self._answers = {"chat": False, "api": False}

    # --- life ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the index on the worker, go on with the collections a run left unfinished, then
        rescan each; rescans again every 10 minutes. An unusable index is a DocumentsProblem."""
        # numpy and SQLite's index come with it: ~0.2 s of imports, kept off the window's thread.
        worker_module = await asyncio.to_thread(importlib.import_module, "app.service.documents.documents_worker")
        IndexWorker = worker_module.IndexWorker  # noqa: N806 - the class, as an import would name it
        loop = asyncio.get_running_loop()

        def post(call: Callable[[], None]) -> None:
            try:
                loop.call_soon_threadsafe(call)
            except RuntimeError:  # the loop closed (the app is ending): nobody listens
                pass

        self._worker = worker = IndexWorker(self._open_index, self._heard, post, self._turns)
        worker.hold.set(**self._hold)
        worker.start()
        await self._choose(await asyncio.to_thread(self._current_model))
        try:
            rows = await self._on_worker(lambda index: index.collections())
        except DocumentsError:
            return  # said as a DocumentsProblem; every later call raises it again
        unfinished = [row.name for row in rows if row.pending or row.indexed_at is None]
        worker.want(unfinished + [row.name for row in rows if row.name not in unfinished])
        self._rescanned = time.monotonic()
        self._tasks.append(loop.create_task(self._every(RESCAN_EVERY_S, self.rescan)))
        if self._read_power is not None:
            self._tasks.append(loop.create_task(self._every(POWER_EVERY_S, self._poll_power, at_once=True)))

    async def close(self) -> None:
        """Stop: what was read is kept, the rest stays pending for the next start."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._worker is not None:
            await asyncio.to_thread(self._worker.close)
            # The reader serves one thread: it ends here once the worker's thread has ended (a
            # worker stuck in a file past the wait leaves it to the exit's clean-up).
            if self._pool is not None and not self._worker.alive:
                await asyncio.to_thread(self._pool.close)
        if self._worker is None or not self._worker.alive:  # never started (`kestrel serve`), or ended
            await asyncio.to_thread(self._turns.close)

    # --- what the window reads -------------------------------------------------------------

    def collections(self) -> tuple[CollectionInfo, ...]:
        """The collections as last known (no I/O): CollectionsChanged brings news."""
        return self._infos

    async def files(self, name: str) -> tuple[FileInfo, ...]:
        """The collection's files, and why each unreadable one could not be read."""
        records = await self._on_worker(lambda index: _named(index, name).files(name))
        return tuple(FileInfo(r.path, r.state.value, r.reason, r.chunks) for r in records)

    async def search(self, question: str, names: Sequence[str], limit: int) -> list[Hit]:
        """The passages of these collections that best answer `question`: by keyword and meaning
        once the chosen model's vectors exist, else by keyword. A name that is no longer a
        collection is left out (compare with collections() to say so); served between two
        files while a run goes on."""
        worker = self._started()

        def run(index: DocumentIndex) -> list[Hit]:
            from app.documents.embedding import EmbeddingError
            from app.documents.search import VectorQuery

            known = {row.name for row in index.collections()}
            wanted = [name for name in dict.fromkeys(names) if name in known]
            if not wanted or not question.strip():
                return []
            vectors = worker.embedder()
            if vectors is not None and index.vector_coverage(vectors[0].model_id, wanted)[0]:
                try:
                    return index.search(question, wanted, limit, vectors=VectorQuery(vectors[0].model_id, vectors[1]))
                except EmbeddingError:
                    pass  # the model failed on the question: keyword search still answers
            return index.search(question, wanted, limit)

        return await asyncio.wrap_future(worker.submit(run))

    async def embed_for_memory(self, texts: Sequence[str]) -> tuple[str, npt.NDArray[np.float32]] | None:
        """The chosen embedding model's id and the unit vectors of `texts` (a row each; none asked: the id
        alone, and the model's process is not started), made on the worker in turn with indexing, as a
        search's question is. None when no model is chosen or usable (the service not started, its vectors
        failed), or when it failed on these texts (logged: the memories are chosen by keyword meanwhile)."""
        worker = self._worker
        if worker is None or not worker.alive:
            return None
        wanted = list(texts)

        def run(_index: DocumentIndex) -> tuple[str, npt.NDArray[np.float32]] | None:
            import numpy as np

            from app.documents.embedding import EmbeddingError
            from app.service.documents.embedding_turns import EmbeddingClosed

            chosen = worker.embedder()
            if chosen is None:
                return None
            if not wanted:
                return chosen[0].model_id, np.zeros((0, 0), dtype=np.float32)
            try:
                vectors = np.asarray(chosen[1].embed(wanted), dtype=np.float32)
            except (EmbeddingError, EmbeddingClosed) as exc:
                log.warning("The embedding model failed on %d memory texts: %s", len(wanted), exc)
                return None
            return chosen[0].model_id, vectors

        try:
            return await asyncio.wrap_future(worker.submit(run))
        except (DocumentsError, RuntimeError):  # the index could not be opened, or the service closed
            return None

    # --- what the window changes -------------------------------------------------------------

    async def add_folder(self, folder: Path, name: str | None = None) -> CollectionInfo:
        """Add a folder as a collection; returns once it exists, indexing goes on in the
        background. DocumentsError with plain words: not a folder, a name or folder taken,
        inside (or around) another collection's folder."""
        folder = folder.expanduser()
        resolved = await asyncio.to_thread(folder.resolve)
        if not await asyncio.to_thread(resolved.is_dir):
            what = "is not a folder" if await asyncio.to_thread(resolved.exists) else "does not exist"
            raise DocumentsError(f"{folder} {what}: choose the folder whose documents to add.")
        chosen = (name if name is not None else resolved.name or str(resolved)).strip()
        if not chosen or len(chosen) > MAX_NAME or not chosen.isprintable():
            raise DocumentsError(f"“{chosen}” cannot name a collection: give a name of 1 to {MAX_NAME} letters, "
                                 "digits or signs.")
        for info in self._infos:
            if info.name.casefold() == chosen.casefold():
                raise DocumentsError(f"There is already a collection named “{info.name}” (of {info.folder}): "
                                     "choose another name.")
            if resolved == info.folder:
                raise DocumentsError(f"{resolved} is already the collection “{info.name}”: use Reindex to read "
                                     "it again.")
            if resolved.is_relative_to(info.folder) or info.folder.is_relative_to(resolved):
                inner, outer = (resolved, info) if resolved.is_relative_to(info.folder) else (info.folder, None)
                where = (f"{inner} is inside the folder of the collection “{info.name}”" if outer is not None
                         else f"{resolved} holds the folder of the collection “{info.name}”")
                raise DocumentsError(f"{where}: its files would be indexed twice. Add a folder beside it, "
                                     "or remove that collection first.")
        worker = self._started()
        collection = await self._on_worker(lambda index: index.add_collection(resolved, chosen))
        worker.want([collection.name])
        await self._refresh()
        return next((i for i in self._infos if i.name == collection.name), None) or CollectionInfo(
            collection.name, collection.folder, 0, 0, 0, 0, 0, None, IndexState.WAITING)

    async def remove(self, name: str) -> None:
        """Drop a collection from the index (its folder is never touched); a run of it stops."""
        worker = self._started()
        worker.cancel_run(name)
        await self._on_worker(lambda index: _named(index, name).remove_collection(name), between_runs=True)
        await self._refresh()

    async def reindex(self, name: str) -> None:
        """Read every file of the collection again (a refused file may read now), in the background."""
        worker = self._started()
        worker.cancel_run(name)
        await self._on_worker(lambda index: _named(index, name).mark_pending(name), between_runs=True)
        worker.want([name], first=True)

    def rescan(self) -> None:
        """Look for new, changed and deleted files in every collection (cheap: sizes and times;
        0.3-0.7 s of the worker's time for 10,000 files, benchmarks/indexing_stall.py)."""
        if self._worker is not None:
            self._rescanned = time.monotonic()
            self._worker.want([info.name for info in self._infos])

    def window_shown(self) -> None:
        """The window came back to the front: the user may have changed files meanwhile, so a
        rescan, unless one began in the last minute (switching apps back and forth)."""
        if time.monotonic() - self._rescanned >= SHOWN_RESCAN_AFTER_S:
            self.rescan()

    def pause(self) -> None:
        """The user's Pause: indexing waits (between two files) until resume()."""
        self._set_hold(user=True)

    def resume(self) -> None:
        self._set_hold(user=False)

    def set_answering(self, busy: bool) -> None:
        """An answer streams (True) or ended: indexing gives it the machine meanwhile."""
        self._set_hold(answering=busy)

    def set_saving_power(self, saving: bool) -> None:
        """Battery saver is on (True) or off: indexing waits meanwhile, and says why. Running on
        battery is read by the service itself (`read_power`), and holds it too."""
        self._set_hold(saving=saving)

    def waiting_because(self) -> str:
        """Why indexing waits now ("" when it does not), in IndexingProgress's words."""
        return hold_words(**self._hold)

    def hear(self, event: Event) -> None:
        """A bus listener: a chat's answer or an API answer starting or ending holds or frees
        indexing (either may end while the other runs: indexing waits for both)."""
        if isinstance(event, AnswerStarted):
            self._answers["chat"] = True
        elif isinstance(event, (AnswerFinished, AnswerInterrupted)):
            self._answers["chat"] = False
        elif isinstance(event, ServingChanged):
            self._answers["api"] = event.serving
        elif isinstance(event, LibraryListed):
            self._follow_library()
            return
        else:
            return
        self.set_answering(any(self._answers.values()))

    # --- the embedding model -------------------------------------------------------------------

    def embedding_model(self) -> str | None:
        """The id of the model whose vectors search uses (the CLI's choice: settings.embedding_model,
        else the oldest embedding model installed), None without one."""
        return self._model.id if self._model is not None else None

    async def choose_embedding_model(self, model_id: str | None) -> None:
        """Choose an installed embedding model (None: back to the default, the oldest installed),
        kept in the settings the CLI reads too; its vectors are filled in the background."""
        if model_id is not None:
            found = await asyncio.to_thread(self._library.find, model_id) if self._library else None
            if found is None or found.missing:
                raise DocumentsError(f"No installed model has the id “{model_id}”: install it in the model "
                                     "manager first.")
            if found.purpose is not ModelPurpose.EMBEDDING:
                raise DocumentsError(f"{found.title} is not an embedding model: it cannot turn documents into "
                                     "vectors. Choose one the model manager marks as an embedding model.")
        settings = dataclasses.replace(self._settings(), embedding_model=model_id)
        if self._save_settings is not None:
            await self._save_settings(settings)
        await self._choose(await asyncio.to_thread(self._current_model, settings))

    # --- the embedding model for the API server ---------------------------------------------------

    async def embedding_model_in_use(self) -> InstalledModel | None:
        """The embedding model the documents use, as embedding_model() names it; read from the library
        when the service was never started (`kestrel serve` indexes nothing)."""
        if self._worker is not None:
            return self._model
        return await asyncio.to_thread(self._current_model)

    def embedding_turn(self, path: Path) -> AbstractContextManager[Embedder]:
        """The process of the embedding model at `path`, for one caller until the block ends, in turn
        with indexing's batches and search's questions (it waits: call it off the event loop)."""
        return self._turns.turn(path)

    # --- inside ---------------------------------------------------------------------------------

    def _heard(self, event: Event) -> None:
        if isinstance(event, CollectionsChanged):
            self._infos = event.collections
        self._emit(event)

    def _set_hold(self, **flags: bool) -> None:
        self._hold.update(flags)
        if self._worker is not None:
            self._worker.hold.set(**flags)

    def _started(self) -> IndexWorker:
        if self._worker is None:
            raise RuntimeError("DocumentsService.start() was not awaited")
        return self._worker

    async def _on_worker(self, run: Callable[[DocumentIndex], T], between_runs: bool = False) -> T:
        return await asyncio.wrap_future(self._started().submit(run, between_runs))

    async def _refresh(self) -> None:
        """The collections read again; their CollectionsChanged is heard before this returns."""
        worker = self._started()
        await self._on_worker(lambda _index: worker.refresh())

    def _open_index(self) -> DocumentIndex:
        """On the worker thread: the index, reading in one reader child kept for the service's life."""
        from app.documents.chunks import chunk_document
        from app.documents.index import DocumentIndex, default_database
        from app.documents.reader_worker import ReaderPool

        read = self._read
        if read is None:
            self._pool = ReaderPool()
            read = self._pool.read_all
        return DocumentIndex(self._database or default_database(), read, chunk_document)

    def _make_embedder(self, path: Path) -> Embedder:
        if self._embedder is not None:
            return self._embedder(path)
        from app.documents.embedding import EmbeddingProcess

        return EmbeddingProcess(path)

    def _current_model(self, settings: Settings | None = None) -> InstalledModel | None:
        """The model settings name, else the oldest installed: the CLI's rule, the library's."""
        if self._library is None:
            return None
        return self._library.embedding_model((settings or self._settings()).embedding_model)

    def _follow_library(self) -> None:
        """The library changed (a model installed, downloaded or removed anywhere): with no model
        chosen, the first embedding model installed is used at once, and a removed one no longer."""
        if self._worker is None:
            return  # start() chooses

        async def follow() -> None:
            model = await asyncio.to_thread(self._current_model)
            if (model.id if model else None) != self.embedding_model():
                await self._choose(model)

        self._tasks = [task for task in self._tasks if not task.done()]
        self._tasks.append(asyncio.get_running_loop().create_task(follow()))

    async def _choose(self, model: InstalledModel | None) -> None:
        self._model = model
        worker = self._started()
        choice = None
        if model is not None:
            try:
                choice = await asyncio.to_thread(_embedding_choice, model.path)
            except (ModelFileError, OSError) as exc:
                self._model = None
                self._emit(DocumentsProblem("", f"The embedding model {model.id} cannot be used ({exc}): the "
                                                 "documents are searched by keyword only. Choose another."))
        worker.choose(choice)

    async def _poll_power(self) -> None:
        """Battery saver holds indexing as set_saving_power does; running on battery alone too,
        said as such (the words must be true)."""
        if self._read_power is not None:
            power, before = await asyncio.to_thread(self._read_power), self._polled
            self._polled = power
            # A change is applied, so that set_saving_power's word stands until the power changes.
            if before is None or power.saver != before.saver:
                self.set_saving_power(power.saver)
            if before is None or power.on_battery != before.on_battery:
                self._set_hold(battery=power.on_battery)

    async def _every(self, seconds: float, call: Callable[[], object], at_once: bool = False) -> None:
        if not at_once:
            await asyncio.sleep(seconds)
        while True:
            result = call()
            if asyncio.iscoroutine(result):
                await result
            await asyncio.sleep(seconds)


def _embedding_choice(path: Path) -> EmbeddingChoice:
    """The model's vector id reads its whole file (a hash): off the loop."""
    from app.documents.embed_worker import model_id_of
    from app.library.model_files.gguf_info import read_gguf_info
    from app.service.documents.documents_worker import EmbeddingChoice

    return EmbeddingChoice(path, model_id_of(path, read_gguf_info(path).name))


def _named(index: DocumentIndex, name: str) -> DocumentIndex:
    """The index, once `name` is one of its collections: else DocumentsError in the window's words
    (the index's own name `kestrel docs` commands)."""
    if name not in {collection.name for collection in index.collections()}:
        raise DocumentsError(f"There is no collection named “{name}”: it may have been removed meanwhile "
                             "(by another Kestrel window or kestrel docs remove).")
    return index
