"""The downloads the user started: queued, run one at a time on worker threads, paused,
resumed, cancelled, remembered across restarts; what happens goes out as DownloadChanged."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from app.core.files import write_atomically
from app.core.paths import data_paths
from app.library.catalog import CatalogEntry
from app.library.download import (DownloadControl, DownloadError, DownloadOptions, DownloadProgress,
                                  DownloadStopped)
from app.library.fetch import FetchRefused, Fetched, discard_unit, fetch_unit, unit_folder
from app.library.huggingface.hub import DownloadUnit, catalog_unit
from app.library.models import ModelLibrary
from app.service.events import DownloadChanged, DownloadId, DownloadItem, DownloadState
from app.voice.catalog.fetch import (SPEECH_FORMAT, SpeechFetched, SpeechFetchRefused, discard_speech, fetch_speech,
                                    speech_parts_size)

log = logging.getLogger(__name__)

STATE_VERSION = 1
_ACTIVE = (DownloadState.RUNNING, DownloadState.VERIFYING)
_FINAL = (DownloadState.DONE, DownloadState.CANCELLED)
_RESTORED = "Paused when Kestrel closed; resume it to continue from where it stopped."
# The state is the headline ("Cancelled", "Paused"); the message only adds what it does not say.
_DELETED = "What had arrived was deleted."
_KEPT = "What arrived is kept; resuming continues from there."


Listener = Callable[[DownloadChanged], None]


class _Job:
    """A download's unit and its control; touched on the event loop's thread only."""

    def __init__(self, item: DownloadItem, unit: DownloadUnit) -> None:
        self.item = item
        self.unit = unit
        self.control: DownloadControl | None = None
        self.thread: threading.Thread | None = None
        self.wanted: DownloadState | None = None  # what a stop() was for: PAUSED or CANCELLED


class _Library:
    """Where a model's unit goes: the models library (app/library/fetch.py)."""

    def __init__(self, library: ModelLibrary) -> None:
        self._library = library

    def fetch(self, unit: DownloadUnit, **how: Any) -> Fetched:
        return fetch_unit(self._library, unit, **how)

    def discard(self, unit: DownloadUnit) -> None:
        discard_unit(self._library, unit)

    def kept(self, unit: DownloadUnit) -> int | None:
        """The bytes an unfinished download of the unit left; None when it left nothing, not even its folder."""
        folder = unit_folder(self._library, unit, claim=False)
        if folder is None:
            return None
        return sum(p.lstat().st_size for p in folder.rglob("*.part") if p.is_file() and not p.is_symlink())


class _Speech:
    """Where a speech model's or voice's unit goes: the speech folder (app/voice/catalog/fetch.py)."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder

    def fetch(self, unit: DownloadUnit, **how: Any) -> SpeechFetched:
        return fetch_speech(self._folder, unit, **how)

    def discard(self, unit: DownloadUnit) -> None:
        discard_speech(self._folder, unit)

    def kept(self, unit: DownloadUnit) -> int | None:
        return speech_parts_size(self._folder, unit) or None


class DownloadQueue:
    """Downloads into the library (a speech unit: into speech_folder), `parallel` at a time (one by default),
    others queued.

    Call it from the event loop's thread. Unfinished downloads are kept in state_file and
    come back paused when the queue is made again (after a restart).
    """

    def __init__(self, library: ModelLibrary, state_file: Path, *, parallel: int = 1,
                 options: DownloadOptions = DownloadOptions(), endpoint: str | None = None,
                 speech_folder: Path | None = None) -> None:
        self._library = _Library(library)
        self._speech = _Speech(speech_folder or data_paths().data / "speech")
        self._state_file = state_file
        self._parallel = max(1, parallel)
        self._options = options
        self._endpoint = endpoint
        self._jobs: dict[DownloadId, _Job] = {}
        self._listeners: list[Listener] = []
        self._closing = False
        self.last_problem: str | None = None
        # Writes of the list and deletions of cancelled parts, one at a time, off the loop.
        self._disk = ThreadPoolExecutor(1, thread_name_prefix="downloads disk")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._restore()

    # --- what a front end calls ------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def items(self) -> tuple[DownloadItem, ...]:
        return tuple(job.item for job in self._jobs.values())

    def start(self, what: CatalogEntry | DownloadUnit) -> DownloadId:
        """Queue a catalog model or a unit; the same unit already in the list is not added twice."""
        unit = catalog_unit(what, self._endpoint) if isinstance(what, CatalogEntry) else what
        urls = sorted(f.url for f in unit.files)
        for job in self._jobs.values():
            if job.item.state not in _FINAL and sorted(f.url for f in job.unit.files) == urls:
                return job.item.id
        job = _Job(DownloadItem(uuid.uuid4().hex[:12], unit.title, DownloadState.QUEUED, total=unit.size,
                                catalog_id=unit.catalog_id, source=unit.source), unit)
        self._jobs[job.item.id] = job
        self._changed(job, save=True)
        self._pump()
        return job.item.id

    def pause(self, download_id: DownloadId) -> None:
        """A running download stops with its parts kept; the next queued one starts."""
        job = self._jobs[download_id]
        if job.item.state in _ACTIVE and job.control is not None:
            job.wanted = DownloadState.PAUSED
            job.control.stop()
        elif job.item.state == DownloadState.QUEUED:
            self._set(job, state=DownloadState.PAUSED, message="Paused.", save=True)

    def resume(self, download_id: DownloadId) -> None:
        """A paused or failed download goes back in the queue, to continue where it stopped."""
        job = self._jobs[download_id]
        if job.item.state in (DownloadState.PAUSED, DownloadState.FAILED):
            self._set(job, state=DownloadState.QUEUED, message="", save=True)
            self._pump()

    def cancel(self, download_id: DownloadId) -> None:
        """End a download and delete what arrived of it."""
        job = self._jobs[download_id]
        if job.item.state in _ACTIVE and job.control is not None:
            job.wanted = DownloadState.CANCELLED
            job.control.cancel()
        elif job.item.state not in _FINAL:
            self._set(job, save=True, **_cancelled(job.item.done))
            self._on_disk_thread(self._discard, job)

    def _discard(self, job: _Job) -> None:
        """On the disk thread: delete what arrived of a cancelled download."""
        try:
            self._destination(job.unit).discard(job.unit)
        except (FetchRefused, OSError) as exc:
            message = f"What had arrived could not be deleted: {exc}"
            self._post(lambda: self._set(job, message=message))

    def forget_finished(self) -> None:
        """Drop done, failed and cancelled downloads from the list (their files stay as they are)."""
        for job in list(self._jobs.values()):
            if job.item.state in (*_FINAL, DownloadState.FAILED):
                del self._jobs[job.item.id]
        self._save()

    async def close(self) -> None:
        """The app is closing: running downloads stop with their parts kept (paused next time).
        Closing again does nothing."""
        if self._closing:
            return
        self._closing = True  # what is queued stays queued: it comes back paused next time
        running = [job for job in self._jobs.values() if job.thread is not None]
        for job in running:
            job.wanted = DownloadState.PAUSED
            if job.control is not None:
                job.control.stop()
        for job in running:
            if job.thread is not None:
                await asyncio.to_thread(job.thread.join, 30)
        self._save()
        await asyncio.to_thread(self._disk.shutdown, wait=True)

    # --- running ----------------------------------------------------------------------

    def _pump(self) -> None:
        if self._closing:
            return
        running = sum(1 for job in self._jobs.values() if job.thread is not None)
        for job in self._jobs.values():
            if running >= self._parallel:
                return
            if job.item.state == DownloadState.QUEUED and job.thread is None:
                self._run(job)
                running += 1

    def _run(self, job: _Job) -> None:
        loop = asyncio.get_running_loop()
        control = job.control = DownloadControl()
        job.wanted = None
        self._set(job, state=DownloadState.RUNNING, message="")

        def post(*call: object) -> None:
            try:
                loop.call_soon_threadsafe(*call)  # type: ignore[arg-type]
            except RuntimeError:  # the loop is closed: the app is gone, no one to tell
                pass

        def progress(report: DownloadProgress) -> None:
            post(self._progress, job, report)

        def step(words: str) -> None:
            post(self._step, job, words)

        def work() -> None:
            outcome: Fetched | SpeechFetched | BaseException
            try:
                outcome = self._destination(job.unit).fetch(job.unit, control=control, progress=progress,
                                                            options=self._options, steps=step)
            except Exception as exc:  # handed to the loop, which words it for the item
                outcome = exc
            post(self._finished, job, outcome)

        job.thread = threading.Thread(target=work, name=f"download {job.item.title}", daemon=True)
        job.thread.start()

    def _step(self, job: _Job, words: str) -> None:
        """What a running download does before its bytes flow ("Connecting to huggingface.co…")."""
        if job.item.state == DownloadState.RUNNING and job.wanted is None and words != job.item.message:
            self._set(job, message=words)

    def _progress(self, job: _Job, report: DownloadProgress) -> None:
        if job.item.state not in _ACTIVE:
            return
        complete = report.total is not None and report.done >= report.total
        self._set(job, state=DownloadState.VERIFYING if complete else DownloadState.RUNNING, done=report.done,
                  total=report.total, bytes_per_second=report.bytes_per_second,
                  seconds_left=report.seconds_left, message="")

    def _finished(self, job: _Job, outcome: Fetched | SpeechFetched | BaseException) -> None:
        job.thread, job.control = None, None
        if isinstance(outcome, SpeechFetched):
            size = outcome.size
            self._set(job, state=DownloadState.DONE, done=size, total=size, bytes_per_second=0.0,
                      seconds_left=None, message=_speech_done_words(outcome), save=True)
        elif isinstance(outcome, Fetched):
            model = outcome.model
            self._set(job, state=DownloadState.DONE, model_id=model.id, done=model.size, total=model.size,
                      bytes_per_second=0.0, seconds_left=None, message=_done_words(outcome), save=True)
        elif isinstance(outcome, DownloadStopped):
            if outcome.cancelled or job.wanted == DownloadState.CANCELLED:
                self._set(job, save=True, **_cancelled(job.item.done))
            else:
                self._set(job, state=DownloadState.PAUSED, message=_KEPT, bytes_per_second=0.0,
                          seconds_left=None, save=True)
        elif isinstance(outcome, (DownloadError, FetchRefused, SpeechFetchRefused)):
            self._set(job, state=DownloadState.FAILED, message=outcome.message, bytes_per_second=0.0,
                      seconds_left=None, save=True)
        else:
            log.error("download of %s failed", job.item.title, exc_info=outcome)
            self._set(job, state=DownloadState.FAILED, bytes_per_second=0.0, seconds_left=None, save=True,
                      message=f"Kestrel failed while downloading {job.item.title} ({outcome!r}). "
                              f"This is a bug; please report it. What arrived is kept.")
        self._pump()

    # --- state, events, the file ------------------------------------------------------

    def _set(self, job: _Job, save: bool = False, **changes: object) -> None:
        job.item = replace(job.item, **changes)  # type: ignore[arg-type]
        self._changed(job, save)

    def _changed(self, job: _Job, save: bool) -> None:
        if save:
            self._save()
        event = DownloadChanged(job.item)
        for listener in list(self._listeners):
            listener(event)

    def _save(self) -> None:
        """Remember the unfinished downloads: the list is taken now, written on the disk thread
        (in order, so the last write is the newest list), never on the event loop's thread."""
        jobs = [_Job(job.item, job.unit) for job in self._jobs.values()]
        self._on_disk_thread(self._write, jobs)

    def _write(self, jobs: list[_Job]) -> None:
        kept = [{"id": job.item.id, "title": job.item.title, "total": job.item.total,
                 "unit": job.unit.to_dict()}
                for job in jobs if self._unfinished(job)]
        data = {"version": STATE_VERSION, "downloads": kept}
        try:
            write_atomically(self._state_file, json.dumps(data, indent=2).encode("utf-8"))
        except OSError as exc:
            self.last_problem = (f"Could not remember the unfinished downloads in "
                                 f"{self._state_file}: {exc.strerror or exc}.")

    async def settled(self) -> None:
        """Wait until the list and deletions asked for so far are on disk."""
        await asyncio.wrap_future(self._disk.submit(lambda: None))

    def _on_disk_thread(self, work: Callable[..., None], *args: object) -> None:
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside the event loop (a script): do it now
            work(*args)
            return
        self._disk.submit(work, *args)

    def _post(self, call: Callable[[], None]) -> None:
        try:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(call)
        except RuntimeError:  # the loop is closed: the app is gone, no one to tell
            pass

    def _unfinished(self, job: _Job) -> bool:
        if job.item.state in _FINAL:
            return False
        if job.item.state == DownloadState.FAILED:  # worth offering again only if something was kept
            return self._destination(job.unit).kept(job.unit) is not None
        return True

    def _destination(self, unit: DownloadUnit) -> _Library | _Speech:
        return self._speech if unit.format == SPEECH_FORMAT else self._library

    def _restore(self) -> None:
        try:
            data = json.loads(self._state_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            self.last_problem = f"The list of unfinished downloads could not be read ({exc}); it starts empty."
            return
        entries = data.get("downloads") if isinstance(data, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            try:
                unit = DownloadUnit.from_dict(entry["unit"])
                done = self._destination(unit).kept(unit) or 0
                item = DownloadItem(str(entry["id"]), str(entry["title"]), DownloadState.PAUSED, done=done,
                                    total=_whole_number(entry.get("total"), unit.size),
                                    message=_RESTORED, catalog_id=unit.catalog_id, source=unit.source)
            except (KeyError, TypeError, ValueError):
                self.last_problem = "An unfinished download could not be read back; it was left out."
                continue
            self._jobs[item.id] = _Job(item, unit)


def _whole_number(value: object, otherwise: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else otherwise


def _cancelled(done: int) -> dict[str, object]:
    """A cancelled item: nothing left to show of its progress, its state says "Cancelled"."""
    return {"state": DownloadState.CANCELLED, "message": _DELETED if done else "", "done": 0,
            "bytes_per_second": 0.0, "seconds_left": None}


def _speech_done_words(fetched: SpeechFetched) -> str:
    if fetched.already_installed:
        return "Already downloaded."
    return "Downloaded; every file's SHA-256 was checked. Choose it in File → Settings… → Voice."


def _done_words(fetched: Fetched) -> str:
    if fetched.already_installed:
        return f"Already installed as {fetched.model.id}."
    if all(f.verified_sha256 for f in fetched.files):
        return "Downloaded; its SHA-256 was checked."
    return "Downloaded; the server stated no SHA-256, so only its size was checked."
