"""Download one model unit (one file, or the files of an ONNX folder or a split GGUF), all or nothing."""

from __future__ import annotations

import errno
import http.client
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Callable, Iterator, Sequence, TypeVar

from app.library.download.control import DownloadControl, PauseRequested
from app.core.units import human_size
from app.library.download.errors import DownloadError, DownloadErrorKind, DownloadStopped, gave_up
from app.library.download.part import DownloadedFile, PartFile, PartOpener, open_for_append
from app.library.download.progress import ProgressCallback, ProgressReporter
from app.library.download.transport import (Answer, TransientFailure, check_scheme, describe,
                                             probe, request)

T = TypeVar("T")


@dataclass(frozen=True)
class FileSpec:
    """One file to fetch: its URL, its path inside the target folder ("/"-separated), and
    its SHA-256 and size where a catalog knows them (they win over what a server says).

    stated_by names who gave that SHA-256 and size, in the messages about them.
    """

    url: str
    name: str
    sha256: str | None = None
    size: int | None = None
    stated_by: str = "the catalog"


@dataclass(frozen=True)
class DownloadOptions:
    """How hard to try; tests pass short delays and a failing opener (the disk-full seam)."""

    retry_delays: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0)
    timeout_s: float = 30.0
    chunk_size: int = 256 * 1024
    space_margin: int = 64 * 1024 * 1024
    open_part: PartOpener = open_for_append


@dataclass
class _Plan:
    """One file of the unit: what is expected of it, learned before and during the fetch."""

    spec: FileSpec
    part: PartFile
    size: int | None
    sha256: str | None
    sha_source: str = "the server"


class UnitDownload:
    """Fetches the unit's files into `<name>.part`, checks all of them, then renames them.

    run() blocks (call it on a worker thread) and returns the files in place, or raises
    DownloadError (the user can act on it) or DownloadStopped (control.cancel()/stop()).
    A new UnitDownload over the same folder continues from the parts an earlier one left.
    """

    def __init__(self, files: Sequence[FileSpec], folder: Path,
                 control: DownloadControl | None = None,
                 progress: ProgressCallback | None = None,
                 options: DownloadOptions = DownloadOptions()) -> None:
        if not files:
            raise ValueError("a unit has at least one file")
        self._specs = list(files)
        self._folder = folder
        self._control = control or DownloadControl()
        self._reporter = ProgressReporter(progress)
        self._options = options
        self._plans: list[_Plan] = []

    def run(self) -> list[DownloadedFile]:
        for spec in self._specs:
            check_scheme(spec.url)
        parts = [PartFile(spec.name, self._final_path(spec.name), self._options.open_part)
                 for spec in self._specs]
        if len({part.final for part in parts}) < len(parts):
            raise ValueError("a file named twice in one unit")
        try:
            self._plans = [self._plan(spec, part) for spec, part in zip(self._specs, parts)]
            self._check_space()
            done = [self._fetch(plan) for plan in self._plans]
        except DownloadStopped as stop:
            raise self._stopped(stop, parts) from None
        for plan in self._plans:
            plan.part.put_in_place()
        return done

    def _final_path(self, name: str) -> Path:
        parts = PurePosixPath(name).parts
        if not parts or name.startswith("/") or any(p in ("..", ".", "") for p in parts):
            raise ValueError(f"not a relative file name: {name!r}")
        return self._folder.joinpath(*parts)

    def _plan(self, spec: FileSpec, part: PartFile) -> _Plan:
        facts = self._with_retries(spec.url, lambda: probe(spec.url, self._options.timeout_s))
        catalog_sha = spec.sha256.lower() if spec.sha256 else None
        changed = (catalog_sha and facts.sha256 and catalog_sha != facts.sha256) or \
            (spec.size is not None and facts.size is not None and spec.size != facts.size)
        if changed:
            raise DownloadError(DownloadErrorKind.CHANGED,
                                f"The server now offers a different {spec.name} than "
                                f"{spec.stated_by} expects ({spec.url}). Nothing was "
                                f"downloaded; {spec.stated_by} may be out of date.")
        return _Plan(spec, part, spec.size if spec.size is not None else facts.size,
                     catalog_sha or facts.sha256,
                     spec.stated_by if catalog_sha else "the server")

    def _check_space(self) -> None:
        """Refuse before the first byte when what is still to come cannot fit."""
        needed = sum(p.size - (p.part.length if p.part.length <= p.size else 0)
                     for p in self._plans if p.size is not None)
        if needed == 0:
            return
        where = self._folder
        while not where.exists() and where != where.parent:
            where = where.parent
        free = shutil.disk_usage(where).free
        if needed + self._options.space_margin > free:
            raise DownloadError(DownloadErrorKind.NO_SPACE,
                                f"Not enough free disk space to download {self._label()}: it "
                                f"needs {human_size(needed + self._options.space_margin)} and "
                                f"{human_size(free)} is free on the disk of {where}. Free some "
                                f"space and try again.")

    def _fetch(self, plan: _Plan) -> DownloadedFile:
        self._with_retries(plan.spec.url, lambda: self._transfer(plan))
        checked = plan.part.verify(plan.size, plan.sha256, plan.sha_source)
        self._report(plan.spec.name, force=True)
        return checked

    def _with_retries(self, url: str, attempt: Callable[[], T]) -> T:
        """Retry transient failures with growing delays; a try that made progress starts the count again."""
        tries = 0
        while True:
            try:
                return attempt()
            except PauseRequested:
                self._report(paused=True)
                self._control.wait_while_paused()
                self._reporter.meter.restart()
            except TransientFailure as failure:
                tries = 1 if failure.progressed else tries + 1
                if tries > len(self._options.retry_delays):
                    raise gave_up(url, failure.reason, tries, failure.server_fault) from None
                self._control.sleep(self._options.retry_delays[tries - 1])

    def _transfer(self, plan: _Plan) -> None:
        """Bring the part to its end, from where it is; returns once the body is complete."""
        self._control.checkpoint()
        if plan.size is not None and plan.part.sync() > plan.size:
            plan.part.discard()
        if plan.size is not None and plan.part.exists() and plan.part.length == plan.size:
            return
        answer = self._open_body(plan)
        try:
            with self._disk_errors(plan), plan.part.open() as out:
                self._receive(plan, answer, out)
        finally:
            answer.close()

    def _open_body(self, plan: _Plan) -> Answer:
        """GET the rest of the file; a server that cannot resume gives all of it again."""
        url, timeout, offset = plan.spec.url, self._options.timeout_s, plan.part.sync()
        if offset:
            answer = request(url, "GET", timeout, {"Range": f"bytes={offset}-"}, accept={416})
            where = answer.content_range() if answer.status == 206 else None
            if where is not None and where[0] == offset:
                self._learn_size(plan, where[1])
                return answer
            plan.part.discard()
            if answer.status == 200:  # Range ignored: this answer is the whole file
                self._learn_size(plan, answer.response.length)
                return answer
            answer.close()  # 416, or a range that does not start at the part's end
        answer = request(url, "GET", timeout)
        self._learn_size(plan, answer.response.length)
        return answer

    def _receive(self, plan: _Plan, answer: Answer, out: BinaryIO) -> None:
        expected, got = answer.response.length, 0
        while True:
            self._control.checkpoint()
            try:
                block = answer.response.read1(self._options.chunk_size)
            except (OSError, http.client.HTTPException) as exc:
                raise TransientFailure(describe(exc), progressed=got > 0) from None
            if not block:
                break
            plan.part.write(out, block)
            got += len(block)
            self._reporter.meter.add(len(block))
            self._report(plan.spec.name)
        if expected is not None and got < expected:
            raise TransientFailure("the connection was dropped mid-file", progressed=got > 0)

    def _learn_size(self, plan: _Plan, size: int | None) -> None:
        if plan.size is None and size is not None:
            plan.size = size

    @contextmanager
    def _disk_errors(self, plan: _Plan) -> Iterator[None]:
        """A write that fails stops the download with its part kept for a resume."""
        try:
            yield
        except OSError as exc:
            kept = human_size(plan.part.sync())
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DownloadError(DownloadErrorKind.DISK_FULL,
                                    f"The disk filled up while downloading {plan.spec.name} "
                                    f"into {self._folder}. What arrived ({kept}) is kept: free "
                                    f"some space, then start the download again to continue "
                                    f"from there.") from None
            raise DownloadError(DownloadErrorKind.DISK_ERROR,
                                f"Could not write {plan.spec.name} into {self._folder}: "
                                f"{exc.strerror or exc}. What arrived ({kept}) is kept: fix "
                                f"that, then start the download again.") from None

    def _report(self, file: str = "", paused: bool = False, force: bool = False) -> None:
        sizes = [p.size for p in self._plans]
        total = None if None in sizes else sum(s for s in sizes if s is not None)
        done = sum(p.part.length for p in self._plans)
        self._reporter.report(file or self._label(), done, total, paused=paused, force=force)

    def _stopped(self, stop: DownloadStopped, parts: list[PartFile]) -> DownloadStopped:
        if not stop.cancelled:
            return DownloadStopped(False, f"Download of {self._label()} stopped; what arrived "
                                          f"is kept, and starting it again continues from there.")
        for part in parts:
            part.discard()
        return DownloadStopped(True, f"Download of {self._label()} cancelled; what had "
                                     f"arrived was deleted.")

    def _label(self) -> str:
        first = self._specs[0].name
        more = len(self._specs) - 1
        return first if not more else f"{first} and {more} more file{'s' if more > 1 else ''}"
