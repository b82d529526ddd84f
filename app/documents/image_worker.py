"""The image check's child process: each image checked there, under a time limit and a memory cap."""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from app.documents.image_check import ImageInput, ImageProblem, ImageRefused, ImageResult, PastedImage, check_image
from app.documents.reader_worker import cap_memory, exit_with_parent, lower_priority

# What the child runs on each image: check_image, or a test's stand-in that hangs or crashes.
# It must be picklable (a module-level function): the child is spawned.
CheckFunction = Callable[[ImageInput], ImageResult]
# An image decodes in well under a second; past this it is built to hang a decoder.
SECONDS_PER_IMAGE = 10.0
# 100 megapixels as RGBA is 400 MB, and a resize holds a second copy; the interpreter and
# Pillow's libraries take their share of the address space too.
MEMORY_BYTES = 2 * 1024 * 1024 * 1024
_START_S = 60.0


def checker_main(conn: Connection, memory_bytes: int, check: CheckFunction) -> None:
    """The child's loop: an image in, its result out, until None or the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cap_memory(memory_bytes)
    exit_with_parent()
    lower_priority()
    conn.send("ready")
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return
        if item is None:
            return
        try:
            result = check(item)
        except MemoryError:
            result = ImageRefused(_name(item), "checking it needed more memory than Kestrel gives its image check",
                                  ImageProblem.FAILED)
        except Exception as exc:  # noqa: BLE001 - a decoder's surprise on a hostile file is a refusal, not a traceback
            result = ImageRefused(_name(item), f"the image check failed on it ({type(exc).__name__}): the file is "
                                               "probably damaged", ImageProblem.FAILED)
        conn.send(result)


def _name(item: ImageInput) -> str:
    return item.name if isinstance(item, PastedImage) else str(item)


class ImageChecker:
    """One child process for the image check, started for the first image and again after one
    killed it. An image that takes longer than `seconds`, or crashes the child or runs it out of
    memory, comes back refused with the reason; the next goes on. One caller thread at a time."""

    def __init__(self, *, seconds: float = SECONDS_PER_IMAGE, memory_bytes: int = MEMORY_BYTES,
                 check: CheckFunction = check_image) -> None:
        self._seconds, self._memory, self._check = seconds, memory_bytes, check
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None

    def __enter__(self) -> ImageChecker:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def check(self, item: ImageInput) -> ImageResult:
        """Check one image in the child; never raises for anything the image does."""
        conn = self._started()
        try:
            conn.send(item)
        except (BrokenPipeError, OSError):
            return self._died(item)
        if conn.poll(self._seconds):
            try:
                result: ImageResult = conn.recv()
                return result
            except (EOFError, OSError):
                return self._died(item)
        self._kill()
        return ImageRefused(_name(item), f"checking it took longer than {self._seconds:g} s, so Kestrel stopped: "
                                         "the file may be damaged or built to hang a decoder", ImageProblem.FAILED)

    def check_all(self, items: Iterable[ImageInput]) -> Iterator[ImageResult]:
        for item in items:
            yield self.check(item)

    def close(self) -> None:
        if self._conn is not None and self._process is not None and self._process.is_alive():
            try:
                self._conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self._process.join(timeout=2)
        self._kill()

    def _started(self) -> Connection:
        if self._conn is not None and self._process is not None and self._process.is_alive():
            return self._conn
        self._kill()
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        process = ctx.Process(target=checker_main, args=(child, self._memory, self._check),
                              name="kestrel-image-check", daemon=True)
        process.start()
        child.close()
        self._process, self._conn = process, parent
        if not parent.poll(_START_S) or parent.recv() != "ready":
            self._kill()
            raise RuntimeError("the image check process did not start")
        return parent

    def _died(self, item: ImageInput) -> ImageRefused:
        process = self._process
        if process is not None:
            process.join(timeout=5)
        code = process.exitcode if process is not None else None
        self._kill()
        how = f"exit status {code}"
        if code is not None and code < 0:
            try:
                how = f"signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"signal {-code}"
        return ImageRefused(_name(item), f"the image check crashed on it ({how}): the file is probably damaged",
                            ImageProblem.FAILED)

    def _kill(self) -> None:
        process, conn = self._process, self._conn
        self._process, self._conn = None, None
        if process is not None and process.is_alive():
            process.kill()
            process.join(timeout=5)
        if conn is not None:
            conn.close()


def check_in_worker(items: Iterable[ImageInput]) -> Iterator[ImageResult]:
    """Check `items` in one child process, each result in order; the child ends with the iteration."""
    with ImageChecker() as checker:
        yield from checker.check_all(items)
