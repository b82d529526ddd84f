"""The reader's child process: files are parsed there, one at a time, under a time limit and a memory cap."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Callable

from app.documents.limited_child import Answered, LimitedChild, TimedOut, serve
from app.documents.readers import reader_modules
from app.documents.reading import read_document
from app.documents.values import DocumentText, FolderFiles, ReadLimits, Unreadable, UnreadableCause as Cause

Result = DocumentText | Unreadable
# What the child runs on each file: read_document, or a test's stand-in that hangs or crashes.
# It must be picklable (a module-level function): the child is spawned.
ReadFunction = Callable[..., Result]
# What the child is sent for a file: its path, and the collection's folder it must stay in (or None).
_Request = tuple[Path, Path | None]


def reader_main(conn: Connection, limits: ReadLimits, read: ReadFunction, formats: tuple[str, ...]) -> None:
    """The child's loop: a path in, a DocumentText or Unreadable out, until None or the pipe closes.
    Any exception but MemoryError ends the child (read_document turns its own into Unreadable).
    `formats`: the modules that registered the parent's document formats, imported first, so that
    a format registered outside app/documents/readers (by a test) is read here too."""
    for module in formats:
        importlib.import_module(module)

    def out_of_memory(path: Path) -> Unreadable:
        return Unreadable(path, f"reading it needed more than the {limits.memory_bytes // 2**20:,} MB "
                                "of memory Kestrel gives its reader", Cause.OUT_OF_MEMORY)

    def handle(request: _Request) -> Result:
        path, within = request
        return read(path, limits=limits) if within is None else read(path, limits=limits, within=within)

    serve(conn, handle, lambda request: out_of_memory(request[0]))


class ReaderPool:
    """One reader child process, started when the first file comes and started again after a file
    killed it. A file that takes longer than `limits.seconds_per_file`, or makes the child crash
    or run out of memory, comes back as an Unreadable with the reason; the next file goes on.
    One caller thread at a time (the index's worker thread): a file is sent and waited for."""

    def __init__(self, limits: ReadLimits = ReadLimits(), read: ReadFunction = read_document) -> None:
        self._limits = limits
        self._child: LimitedChild[Result] = LimitedChild(reader_main, (limits, read, reader_modules()),
                                                         name="kestrel-reader", role="document reader",
                                                         memory_bytes=limits.memory_bytes)

    @property
    def restarts(self) -> int:
        """Children started again after one was killed or crashed."""
        return self._child.restarts

    def __enter__(self) -> ReaderPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def read(self, path: Path, within: Path | None = None) -> Result:
        """Read one file in the child; never raises for anything the file does. `within`: the
        collection's folder the file must not lead out of (a link is followed only inside it)."""
        request: _Request = (path, within)
        answer = self._child.ask(request, self._limits.seconds_per_file)
        if isinstance(answer, Answered):
            return answer.value
        if isinstance(answer, TimedOut):
            return Unreadable(path, f"reading it took longer than {self._limits.seconds_per_file:g} s, so "
                                    "Kestrel stopped: the file may be damaged or built to hang a reader",
                              Cause.TIMED_OUT)
        return Unreadable(path, f"the reader crashed on it ({answer.how}): the file is probably damaged, or it "
                                f"needed more than the {self._limits.memory_bytes // 2**20:,} MB of memory "
                                "the reader may use", Cause.DAMAGED)

    def read_all(self, paths: Iterable[Path]) -> Iterator[Result]:
        """Each path's result, in order; FolderFiles are read only inside their folder."""
        within = paths.folder if isinstance(paths, FolderFiles) else None
        for path in paths:
            yield self.read(path, within)

    def close(self) -> None:
        """Stop the child: asked to end, then killed if it is in the middle of a file."""
        self._child.close()


def read_in_worker(paths: Iterable[Path], *, limits: ReadLimits = ReadLimits()) -> Iterator[Result]:
    """Read `paths` in one reader child process, yielding each file's result in order (FolderFiles
    only inside their folder); the child ends when the iteration does (or is abandoned)."""
    with ReaderPool(limits) as pool:
        yield from pool.read_all(paths)
