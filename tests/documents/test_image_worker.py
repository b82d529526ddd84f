"""The image check's child process: real checks there, and an image that crashes, hangs or overruns it is refused while Kestrel goes on."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from app.core.attachments import AttachedImage
from app.documents.image_check import ImageInput, ImageProblem, ImageRefusal, ImageResult, check_image
from app.documents.image_worker import ImageChecker, check_in_worker
from tests.helpers.images import bomb_png, write_image


def crash_on_bad(item: ImageInput) -> ImageResult:
    """Stand-in for a decoder that dies on one file (as native code does: no exception)."""
    if isinstance(item, Path) and item.name.startswith("bad"):
        os.kill(os.getpid(), signal.SIGKILL)
    return check_image(item)


def hang_on_bad(item: ImageInput) -> ImageResult:
    if isinstance(item, Path) and item.name.startswith("bad"):
        time.sleep(60)
    return check_image(item)


def eat_memory_on_bad(item: ImageInput) -> ImageResult:
    if isinstance(item, Path) and item.name.startswith("bad"):
        held = [bytearray(64 * 2**20) for _ in range(64)]  # 4 GB at once: past the cap
        assert len(held) == 64
    return check_image(item)


def test_images_are_checked_in_the_child_and_a_bomb_is_refused_there(tmp_path: Path) -> None:
    good = write_image(tmp_path / "good.png", 120, 80)
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(bomb_png())
    first, second = list(check_in_worker([good, bomb]))
    assert isinstance(first, AttachedImage) and (first.width, first.height) == (120, 80)
    assert isinstance(second, ImageRefusal) and second.problem is ImageProblem.TOO_LARGE


def test_a_crash_is_refused_in_words_and_the_next_image_is_checked(tmp_path: Path) -> None:
    bad = write_image(tmp_path / "bad.png", 10, 10)
    good = write_image(tmp_path / "good.png", 10, 10)
    with ImageChecker(check=crash_on_bad) as checker:
        crashed, after = checker.check(bad), checker.check(good)
    assert isinstance(crashed, ImageRefusal) and crashed.problem is ImageProblem.FAILED
    assert "crashed on it (signal SIGKILL)" in crashed.reason and crashed.name == str(bad)
    assert isinstance(after, AttachedImage)


def test_a_hang_is_stopped_after_the_time_limit(tmp_path: Path) -> None:
    bad = write_image(tmp_path / "bad.png", 10, 10)
    good = write_image(tmp_path / "good.png", 10, 10)
    with ImageChecker(check=hang_on_bad, seconds=1.0) as checker:
        started = time.monotonic()
        hung = checker.check(bad)
        took = time.monotonic() - started
        after = checker.check(good)
    assert isinstance(hung, ImageRefusal) and "took longer than 1 s" in hung.reason and took < 10
    assert isinstance(after, AttachedImage)


def test_an_image_that_needs_too_much_memory_is_refused(tmp_path: Path) -> None:
    bad = write_image(tmp_path / "bad.png", 10, 10)
    with ImageChecker(check=eat_memory_on_bad, memory_bytes=1024 * 2**20, seconds=120) as checker:
        refused = checker.check(bad)
    assert isinstance(refused, ImageRefusal) and refused.problem is ImageProblem.FAILED
    assert "more memory than Kestrel gives its image check" in refused.reason


def raise_on_bad(item: ImageInput) -> ImageResult:
    if isinstance(item, Path) and item.name.startswith("bad"):
        raise RuntimeError("a decoder's surprise")
    return check_image(item)


def test_an_exception_in_the_check_is_a_refusal_and_the_child_goes_on(tmp_path: Path) -> None:
    bad = write_image(tmp_path / "bad.png", 10, 10)
    good = write_image(tmp_path / "good.png", 10, 10)
    with ImageChecker(check=raise_on_bad) as checker:
        refused, after = checker.check(bad), checker.check(good)
    assert isinstance(refused, ImageRefusal) and "failed on it (RuntimeError)" in refused.reason
    assert isinstance(after, AttachedImage)
