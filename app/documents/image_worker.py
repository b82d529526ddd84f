"""The image check's child process: each image checked there, under a time limit and a memory cap."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection

from app.documents.image_check import ImageInput, ImageProblem, ImageRefusal, ImageResult, PastedImage, check_image
from app.documents.limited_child import Answered, LimitedChild, TimedOut, serve

# What the child runs on each image: check_image, or a test's stand-in that hangs or crashes.
# It must be picklable (a module-level function): the child is spawned.
CheckFunction = Callable[[ImageInput], ImageResult]
# An image decodes in well under a second; past this it is built to hang a decoder.
SECONDS_PER_IMAGE = 10.0
# 100 megapixels as RGBA is 400 MB, and a resize holds a second copy; the interpreter and
# Pillow's libraries take their share of the address space too.
MEMORY_BYTES = 2 * 1024 * 1024 * 1024


def checker_main(conn: Connection, check: CheckFunction) -> None:
    """The child's loop: an image in, its result out, until None or the pipe closes. Any
    exception in the check is that image's refusal: the child goes on."""
    serve(conn, check, _out_of_memory, _failed)


def _out_of_memory(item: ImageInput) -> ImageRefusal:
    return ImageRefusal(_name(item), "checking it needed more memory than Kestrel gives its image check",
                        ImageProblem.FAILED)


def _failed(item: ImageInput, exc: Exception) -> ImageRefusal:
    # A decoder's surprise on a hostile file is a refusal, not a traceback.
    return ImageRefusal(_name(item), f"the image check failed on it ({type(exc).__name__}): the file is "
                                     "probably damaged", ImageProblem.FAILED)


def _name(item: ImageInput) -> str:
    return item.name if isinstance(item, PastedImage) else str(item)


class ImageChecker:
    """One child process for the image check, started for the first image and again after one
    killed it. An image that takes longer than `seconds`, or crashes the child or runs it out of
    memory, comes back refused with the reason; the next goes on. One caller thread at a time.
    A checker left open is killed when Kestrel exits, as the reader is."""

    def __init__(self, *, seconds: float = SECONDS_PER_IMAGE, memory_bytes: int = MEMORY_BYTES,
                 check: CheckFunction = check_image) -> None:
        self._seconds = seconds
        self._child: LimitedChild[ImageResult] = LimitedChild(checker_main, (check,), name="kestrel-image-check",
                                                              role="image check", memory_bytes=memory_bytes)

    def __enter__(self) -> ImageChecker:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def check(self, item: ImageInput) -> ImageResult:
        """Check one image in the child; never raises for anything the image does."""
        answer = self._child.ask(item, self._seconds)
        if isinstance(answer, Answered):
            return answer.value
        if isinstance(answer, TimedOut):
            return ImageRefusal(_name(item), f"checking it took longer than {self._seconds:g} s, so Kestrel "
                                             "stopped: the file may be damaged or built to hang a decoder",
                                ImageProblem.FAILED)
        return ImageRefusal(_name(item), f"the image check crashed on it ({answer.how}): the file is probably "
                                         "damaged", ImageProblem.FAILED)

    def check_all(self, items: Iterable[ImageInput]) -> Iterator[ImageResult]:
        for item in items:
            yield self.check(item)

    def close(self) -> None:
        self._child.close()


def check_in_worker(items: Iterable[ImageInput]) -> Iterator[ImageResult]:
    """Check `items` in one child process, each result in order; the child ends with the iteration."""
    with ImageChecker() as checker:
        yield from checker.check_all(items)
