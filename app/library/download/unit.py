"""Download one model unit (one file, or the files of an ONNX folder or a split GGUF), all or nothing."""

from __future__ import annotations

import errno
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator, Sequence, TypeVar

from app.core.units import human_size
from app.library.download import budget, resume
from app.library.download.body import HeaderRule, Limit, StallRule, receive
from app.library.download.budget import FileBudget, space_margin
from app.library.download.control import DownloadControl, PauseRequested
from app.library.download.errors import (DownloadError, DownloadErrorKind, DownloadStopped, gave_up,
                                         unreachable, waits_too_long)
from app.library.download.gguf_extent import GgufExtent
from app.library.download.part import DownloadedFile, PartFile, PartOpener, open_for_append
from app.library.download.progress import ProgressCallback, ProgressReporter
from app.library.download.transport import (Answer, RemoteFacts, Steps, TransientFailure, Unreachable,
                                             check_scheme, probe, request, stated_sha256)

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
    """How hard to try and how much to write (budget.py gives each default its reason);
    tests pass short ones, and a failing opener (the disk-full seam).

    retry_delays are the waits between tries that made no progress (one try more than
    waits); lookup_s bounds looking up a host's name; timeout_s bounds connecting and an
    answer's headers; longest_wait_s is the longest Retry-After waited; stall_s and stall_bytes
    say when a body has stalled; space_margin is the least room kept free on the disk,
    space_share the share of the download kept free when that is more; a .gguf file's
    header must end within gguf_header_limit, and bytes that are no GGUF model arrive
    only up to unreadable_gguf_limit.
    """

    retry_delays: tuple[float, ...] = budget.RETRY_DELAYS
    lookup_s: float = budget.LOOKUP_S
    timeout_s: float = budget.CONNECT_S
    longest_wait_s: float = budget.LONGEST_WAIT_S
    stall_s: float = budget.STALL_S
    stall_bytes: int = budget.STALL_BYTES
    progress_bytes: int = budget.PROGRESS_BYTES
    tries_in_all: int = budget.TRIES_IN_ALL
    time_s: float = budget.FILE_TIME_S
    slowest_bytes_per_s: float = budget.SLOWEST_BYTES_PER_S
    unstated_cap: int = budget.UNSTATED_CAP
    chunk_size: int = 256 * 1024
    space_margin: int = budget.SPACE_FLOOR
    space_share: float = budget.SPACE_SHARE
    gguf_header_limit: int = budget.GGUF_HEADER_LIMIT
    unreadable_gguf_limit: int = budget.UNREADABLE_GGUF_LIMIT
    open_part: PartOpener = open_for_append


@dataclass
class _Plan:
    """One file of the unit: what is expected of it, learned before and during the fetch."""

    spec: FileSpec
    part: PartFile
    budget: FileBudget
    size: int | None
    sha256: str | None
    sha_source: str = "the server"
    size_source: str = "the server"
    started: resume.StartedFrom | None = None


class UnitDownload:
    """Fetches the unit's files into `<name>.part`, checks all of them, then renames them.

    steps hears what it is doing while no byte flows ("Looking up huggingface.co…",
    "Connecting to …", "Waiting for … to answer…"), from any thread; progress hears the bytes.
    run() blocks (call it on a worker thread) and returns the files in place, or raises
    DownloadError (the user can act on it) or DownloadStopped (control.cancel()/stop()).
    A new UnitDownload over the same folder continues from the parts an earlier one left.

    Which failures are tried again: a 4xx never; a host that cannot be reached (its name
    does not resolve, the connection is refused, no route) not before it has answered once
    in this run (offline, or a wrong address: waiting cures neither), and within the budget
    after (a network that dropped for a moment); timeouts, drops, 5xx and 429 within the
    budget (budget.py), a 429's or 503's Retry-After waited up to longest_wait_s.
    """

    def __init__(self, files: Sequence[FileSpec], folder: Path,
                 control: DownloadControl | None = None,
                 progress: ProgressCallback | None = None,
                 options: DownloadOptions = DownloadOptions(), steps: Steps | None = None) -> None:
        if not files:
            raise ValueError("a unit has at least one file")
        self._specs = list(files)
        self._folder = folder
        self._control = control or DownloadControl()
        self._reporter = ProgressReporter(progress)
        self._steps = steps
        self._options = options
        self._plans: list[_Plan] = []
        self._reached = False  # whether a server has answered (or connected) in this run

    def run(self) -> list[DownloadedFile]:
        for spec in self._specs:
            check_scheme(spec.url)
            _check_name(spec.name)
        parts = [PartFile(spec.name, self._folder, self._options.open_part) for spec in self._specs]
        if len({part.final for part in parts}) < len(parts):
            raise ValueError("a file named twice in one unit")
        try:
            for part in parts:
                part.make_safe()
            self._plans = [self._plan(spec, part) for spec, part in zip(self._specs, parts)]
            self._check_space()
            done = [self._fetch(plan) for plan in self._plans]
        except DownloadStopped as stop:
            raise self._stopped(stop, parts) from None
        for plan in self._plans:
            plan.part.put_in_place()
        return done

    def _plan(self, spec: FileSpec, part: PartFile) -> _Plan:
        options = self._options
        tries = FileBudget(options.retry_delays, options.progress_bytes, options.tries_in_all,
                           options.time_s, options.slowest_bytes_per_s, part.length)
        facts = self._with_retries(spec.url, tries, part, lambda: spec.size,
                                   lambda: probe(spec.url, options.timeout_s, self._steps, options.lookup_s))
        catalog_sha = spec.sha256.lower() if spec.sha256 else None
        changed = (catalog_sha and facts.sha256 and catalog_sha != facts.sha256) or \
            (spec.size is not None and facts.size is not None and spec.size != facts.size)
        if changed:
            raise self._changed(spec)
        plan = _Plan(spec, part, tries, spec.size if spec.size is not None else facts.size,
                     catalog_sha or facts.sha256, spec.stated_by if catalog_sha else "the server",
                     spec.stated_by if spec.size is not None else "the server")
        plan.started = self._started_from(part, facts)
        return plan

    def _started_from(self, part: PartFile, facts: RemoteFacts) -> resume.StartedFrom | None:
        """What the part on disk began from; a part of another version of the file goes."""
        try:
            started = resume.read(part.path)
        except resume.Unreadable:
            part.discard()
            return None
        if started is not None and ((started.sha256 and facts.sha256 and started.sha256 != facts.sha256)
                                    or (started.size is not None and facts.size is not None
                                        and started.size != facts.size)):
            part.discard()
            return None
        return started

    def _changed(self, spec: FileSpec) -> DownloadError:
        return DownloadError(DownloadErrorKind.CHANGED,
                             f"The server now offers a different {spec.name} than "
                             f"{spec.stated_by} expects ({spec.url}). Nothing was "
                             f"downloaded; {spec.stated_by} may be out of date.")

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
        margin = space_margin(needed, self._options.space_margin, self._options.space_share)
        if needed + margin > free:
            raise DownloadError(DownloadErrorKind.NO_SPACE,
                                f"Not enough free disk space to download {self._label()}: it "
                                f"needs {human_size(needed + margin)} ({human_size(needed)} "
                                f"for the download, {human_size(margin)} kept free for the rest "
                                f"of the computer) and {human_size(free)} is free on the disk "
                                f"of {where}. Free some space and try again.")

    def _fetch(self, plan: _Plan) -> DownloadedFile:
        self._with_retries(plan.spec.url, plan.budget, plan.part, lambda: plan.size,
                           lambda: self._transfer(plan))
        checked = plan.part.verify(plan.size, plan.sha256, plan.sha_source)
        self._report(plan.spec.name, force=True)
        return checked

    def _with_retries(self, url: str, tries: FileBudget, part: PartFile, size: Callable[[], int | None],
                      attempt: Callable[[], T]) -> T:
        """Retry transient failures while the file's budget lasts (see budget.py)."""
        while True:
            try:
                result = attempt()
                self._reached = True
                return result
            except PauseRequested:
                paused_at = time.monotonic()
                self._report(paused=True)
                self._control.wait_while_paused()
                tries.paused_for(time.monotonic() - paused_at)
                self._reporter.meter.restart()
            except TransientFailure as failure:
                if isinstance(failure, Unreachable) and not self._reached:
                    raise unreachable(failure.host, failure.why, part.sync() > 0) from None
                self._reached = True
                wait = tries.failed_try(part.sync(), size())
                if wait is None:
                    raise gave_up(url, failure.reason, tries.failed, failure.server_fault) from None
                if failure.retry_after is not None:
                    if failure.retry_after > self._options.longest_wait_s:
                        raise waits_too_long(url, failure.reason, failure.retry_after) from None
                    wait = max(wait, failure.retry_after)
                self._control.sleep(wait)

    def _transfer(self, plan: _Plan) -> None:
        """Bring the part to its end, from where it is; returns once the body is complete."""
        self._control.checkpoint()
        if plan.size is not None and plan.part.sync() > plan.size:
            plan.part.discard()
        if plan.size is not None and plan.part.exists() and plan.part.length == plan.size:
            return
        opened = self._open_body(plan)
        if opened is None:
            return
        answer, fresh = opened
        try:
            with self._disk_errors(plan), plan.part.open() as out:
                if fresh:
                    plan.started = resume.StartedFrom(resume.validator_of(answer), answer.response.length,
                                                      stated_sha256(answer))
                    resume.write(plan.part.path, plan.started)
                receive(answer, plan.part, out, self._limit(plan),
                        StallRule(self._options.stall_s, self._options.stall_bytes),
                        self._options.chunk_size, self._control, self._arrived(plan.spec.name),
                        self._header_rule(plan))
        finally:
            answer.close()

    def _open_body(self, plan: _Plan) -> tuple[Answer, bool] | None:
        """GET the rest of the file: (the answer, whether it starts the file afresh), or None
        when the server says the part is already all of it."""
        url, timeout, offset = plan.spec.url, self._options.timeout_s, plan.part.sync()
        steps, lookup_s = self._steps, self._options.lookup_s
        if offset:
            headers = {"Range": f"bytes={offset}-"}
            if plan.started is not None and plan.started.validator is not None:
                headers["If-Range"] = plan.started.validator
            answer = request(url, "GET", timeout, headers, accept={416}, steps=steps, lookup_s=lookup_s)
            changed = self._learn_sha256(plan, answer)
            if answer.status == 206 and not changed and self._same_file(plan, answer, offset):
                return answer, False
            if answer.status == 200:  # Range ignored, or If-Range said the file changed: all of it
                plan.part.discard()
                self._learn_size(plan, answer.response.length)
                return answer, True
            answer.close()
            if answer.status == 416 and self._already_whole(plan, answer, offset):
                return None
            plan.part.discard()  # another version, a range that does not fit: start over
        answer = request(url, "GET", timeout, steps=steps, lookup_s=lookup_s)
        self._learn_sha256(plan, answer)
        self._learn_size(plan, answer.response.length)
        return answer, True

    def _same_file(self, plan: _Plan, answer: Answer, offset: int) -> bool:
        """A 206 that starts at the part's end, of the file the part began with."""
        where = answer.content_range()
        if where is None or where[0] != offset:
            return False
        validator = plan.started.validator if plan.started is not None else None
        if validator is not None and not resume.still_valid(validator, answer):
            return False
        self._learn_size(plan, where[1])
        return True

    def _already_whole(self, plan: _Plan, answer: Answer, offset: int) -> bool:
        """A 416 names the file's size: the part is all of it, too long, or the server has
        less than it said (no try can change that)."""
        total = answer.unsatisfied_total()
        if total is None or total < offset:
            return False
        if plan.size is not None and total != plan.size:
            plan.part.damaged(f"the server said it is {human_size(plan.size)} but has only "
                              f"{human_size(total)}")
        self._learn_size(plan, total)
        return True

    def _learn_sha256(self, plan: _Plan, answer: Answer) -> bool:
        """Take the SHA-256 an answer states; True when it is not the one the part began with."""
        stated = stated_sha256(answer)
        if stated is None or stated == plan.sha256:
            return False
        if plan.sha_source != "the server":
            answer.close()
            raise self._changed(plan.spec)
        known, plan.sha256 = plan.sha256, stated
        return known is not None

    def _learn_size(self, plan: _Plan, size: int | None) -> None:
        if plan.size is None and size is not None:
            plan.size = size

    def _limit(self, plan: _Plan) -> Limit:
        """The size the part may reach: the one stated, else the cap or the disk's room."""
        if plan.size is not None:
            return Limit(plan.size, True, plan.size_source)
        free = shutil.disk_usage(plan.part.path.parent).free
        room = plan.part.length + max(free - self._options.space_margin, 0)
        if room < self._options.unstated_cap:
            return Limit(room, False, by_disk=True)
        return Limit(self._options.unstated_cap, False)

    def _header_rule(self, plan: _Plan) -> HeaderRule | None:
        """For a .gguf file, its header read from the first byte: what the part holds
        already (a resumed download), then the body as it arrives."""
        if not plan.spec.name.lower().endswith(".gguf"):
            return None
        extent = GgufExtent(self._options.gguf_header_limit)

        def take(block: bytes) -> bool:
            extent.feed(block)
            return not extent.done
        plan.part.read_back(take)
        return HeaderRule(extent, self._options.unreadable_gguf_limit)

    def _arrived(self, name: str) -> Callable[[int], None]:
        def arrived(count: int) -> None:
            self._reporter.meter.add(count)
            self._report(name)
        return arrived

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


def _check_name(name: str) -> None:
    """A unit's file names come from the code that made the unit: a bad one is a bug."""
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or any(p in ("..", ".", "") for p in parts) or "\0" in name:
        raise ValueError(f"not a relative file name: {name!r}")
