"""Writing a small file so that it is always either the old one or the new one, never torn."""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator


def write_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, fsync it, rename it over, fsync the folder.

    OSError (disk full, read-only) leaves the old file as it was and no temporary behind.
    """
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    # The temporary file is in the same folder so os.replace is a rename on one
    # file system, which is atomic.
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as temp:
            temp.write(data)
            temp.flush()
            os.fsync(temp.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    _fsync_folder(folder)


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable; Windows has no way to open a folder for this."""
    if os.name == "nt":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LockWaitCancelled(Exception):
    """The caller gave up waiting for another process to finish."""


@contextmanager
def exclusive_lock(path: Path, cancelled: Callable[[], bool] | None = None,
                   waiting: Callable[[], None] | None = None, poll_s: float = 0.1) -> Iterator[None]:
    """Hold an OS lock on `path` (created if need be) for the block, across processes.

    The lock belongs to the open file, so a process that dies releases it; the file
    itself stays and means nothing. While another process holds it, waiting() is called
    once and cancelled() is asked every poll_s.
    """
    told = False
    while (held := try_hold_lock(path)) is None:
        if not told and waiting is not None:
            waiting()
            told = True
        if cancelled is not None and cancelled():
            raise LockWaitCancelled(str(path))
        time.sleep(poll_s)
    try:
        yield
    finally:
        held.release()


class HeldLock:
    """An OS lock held until release() or the process ends (see try_hold_lock)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            _unlock(self._fd)
            os.close(self._fd)
            self._fd = None


def try_hold_lock(path: Path) -> HeldLock | None:
    """Take the lock on `path` if no other process holds it; None if one does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if _try_lock(fd):
        return HeldLock(fd)
    os.close(fd)
    return None


def _try_lock(fd: int) -> bool:
    if os.name == "nt":
        return _try_lock_windows(fd)
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _try_lock_windows(fd: int) -> bool:
    import msvcrt

    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
    except OSError:
        return False
    return True


def _unlock(fd: int) -> None:
    if os.name == "nt":
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
        return
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)
