"""Writing files whole (the old one or the new one, never torn), reading a file a person chose within a bound, and
locks between processes."""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import tempfile
import time
from contextlib import contextmanager
from enum import Enum
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


class Refusal(Enum):
    """Why a path the user named is not written to."""

    EXISTS = "exists"  # a file is there and replacing it was not asked for
    LINK = "link"  # a symbolic link (or a Windows junction): writing would go elsewhere
    NOT_A_FILE = "not a file"  # a folder, a device, a named pipe or a socket
    NO_FOLDER = "no folder"  # the folder it would be in does not exist (or is not a folder)


class TargetRefused(Exception):
    """The path the user named is not one Kestrel writes to; nothing was written.

    what: for NOT_A_FILE, what is there instead ("a folder", "a device", ...); for
    NO_FOLDER, "not a folder" where the folder's name is something else.
    """

    def __init__(self, path: Path, refusal: Refusal, what: str = "") -> None:
        super().__init__(f"{path}: {refusal.value}{f' ({what})' if what else ''}")
        self.path = path
        self.refusal = refusal
        self.what = what


def write_user_file(path: Path, data: bytes, *, replace: bool) -> None:
    """Write a file the user named: a new file, or (replace) the regular file already there.

    Never through a link, never over a device, a pipe, a socket or a folder, and never
    into a folder that does not exist (TargetRefused says which). A file replaced keeps
    its mode (and, where the OS lets us, its owner); a new one gets the mode the user's
    umask gives. The data goes to a temporary file beside it first, so a full disk
    (OSError) leaves what was there as it was. The temporary file is created with
    O_CREAT | O_EXCL, which follows no link on POSIX or Windows, and the target is
    renamed over, never opened, so there is no O_NOFOLLOW to need (Windows has none).
    A temporary file an earlier write to the same path left (it was killed mid-write) is
    removed first (_remove_abandoned).
    """
    folder = path.parent
    try:
        if not stat.S_ISDIR(os.stat(folder).st_mode):
            raise TargetRefused(path, Refusal.NO_FOLDER, "not a folder")
    except (FileNotFoundError, NotADirectoryError):
        raise TargetRefused(path, Refusal.NO_FOLDER) from None
    existing = _lstat(path)
    if existing is not None:
        _check_replaceable(path, existing, replace)
    _remove_abandoned(folder, path.name)
    fd, temp = _create_temp(folder, path.name)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            if existing is not None:
                _copy_owner_and_mode(file.fileno(), existing)
            os.fsync(file.fileno())
            if os.name != "nt":  # renamed while its lock is held: never taken for abandoned
                _put_in_place(temp, path, existing is not None)
        if os.name == "nt":  # Windows renames no file that is open
            _put_in_place(temp, path, existing is not None)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    _fsync_folder(folder)


def _put_in_place(temp: str, path: Path, replace: bool) -> None:
    if replace:
        os.replace(temp, path)
    else:
        _rename_without_replacing(temp, path)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _check_replaceable(path: Path, existing: os.stat_result, replace: bool) -> None:
    if _is_link(existing):
        raise TargetRefused(path, Refusal.LINK)
    if not stat.S_ISREG(existing.st_mode):
        raise TargetRefused(path, Refusal.NOT_A_FILE, kind_of(existing.st_mode, 'not a regular file'))
    if not replace:
        raise TargetRefused(path, Refusal.EXISTS)


def _is_link(found: os.stat_result) -> bool:
    """A symbolic link, or on Windows a junction. Other Windows reparse points (OneDrive's
    files on demand) are files to Python's lstat, and are written as files."""
    if stat.S_ISLNK(found.st_mode):
        return True
    return os.name == "nt" and getattr(found, "st_reparse_tag", 0) == _JUNCTION


_JUNCTION = 0xA0000003  # IO_REPARSE_TAG_MOUNT_POINT (typeshed has it on Windows only)


class NotAFile(Exception):
    """The path a person chose is no regular file; `kind` says what it is ("a folder", "a named pipe")."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class FileTooBig(Exception):
    """The file a person chose holds more than the bound; `size` is its bytes."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def read_chosen_file(path: Path, limit: int) -> bytes:
    """Up to limit + 1 bytes of the regular file at path (more than limit: it grew since it was looked at).
    NotAFile or FileTooBig for the caller to word; OSError as the system gives it."""
    if path.is_dir():  # Windows cannot open a folder to ask what it is
        raise NotAFile("a folder")
    # Non-blocking: opening a named pipe to read would otherwise wait for a writer forever.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise NotAFile(kind_of(found.st_mode, "no regular file"))
        if found.st_size > limit:
            raise FileTooBig(found.st_size)
        file = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with file:
        return file.read(limit + 1)


def kind_of(mode: int, other: str = "a special file") -> str:
    """What a file that is not a regular file is, in a few words for a message (its
    st_mode); other for what none of these names."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return other


def _temp_name(name: str, tag: str) -> str:
    # Short enough that a long name plus the additions stays within 255 characters.
    return f".{name[:100]}.{tag}.tmp"


def _create_temp(folder: Path, name: str) -> tuple[int, str]:
    """A new, empty file beside the target, with the mode the umask gives (mkstemp's 0600
    would be what the user gets), locked while its writer has it open (_remove_abandoned)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        temp = os.path.join(folder, _temp_name(name, secrets.token_hex(4)))
        try:
            fd = os.open(temp, flags, 0o666)
        except FileExistsError:
            continue
        if os.name != "nt":
            import fcntl

            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # a file system without locks: the age rule alone protects it
                pass
        return fd, temp
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(folder))


# A temporary file of write_user_file's naming for the same target, left by a write that was
# killed (SIGKILL, a crash, the power), is removed by the next write of that target. A
# writer locks its temporary file at once and holds the lock until it is renamed (POSIX;
# Windows refuses to delete a file another process has open): one nobody holds, and not
# written to for a few seconds, is abandoned. Where the file system keeps no locks, only
# one this old is (no write waits an hour between its bytes and its rename). Any other name
# (the user's own ".notes.tmp", another target's) is never touched.
_UNLOCKED_AFTER_S = 10.0
_UNKNOWN_AFTER_S = 3600.0


def _remove_abandoned(folder: Path, name: str) -> None:
    """Remove the temporary files of earlier writes of folder/name that no writer holds."""
    ours = re.compile(re.escape(f".{name[:100]}.") + "[0-9a-f]{8}" + re.escape(".tmp"))  # _temp_name's
    try:
        with os.scandir(folder) as entries:
            found = [entry.path for entry in entries if ours.fullmatch(entry.name)]
    except OSError:
        return
    for temp in found:
        try:
            if _abandoned(temp):
                os.unlink(temp)
        except OSError:  # in use (Windows), gone meanwhile, or not ours to remove: leave it
            pass


def _abandoned(temp: str) -> bool:
    """A regular file of this user's, not written to for a while, that no writer holds."""
    found = os.lstat(temp)
    if not stat.S_ISREG(found.st_mode) or _is_link(found):
        return False
    if os.name != "nt" and found.st_uid != os.geteuid():
        return False
    age = time.time() - found.st_mtime
    if age < _UNLOCKED_AFTER_S:
        return False
    held = _held(temp)
    return held is False or (held is None and age >= _UNKNOWN_AFTER_S)


def _held(temp: str) -> bool | None:
    """Whether a writer holds the temporary file's lock; None where that cannot be told."""
    if os.name == "nt":
        return False  # a file still open cannot be deleted there: the unlink itself refuses
    import fcntl

    try:
        fd = os.open(temp, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:  # a file system without locks
        return None
    finally:
        os.close(fd)  # the lock, if taken, goes with it: no writer ever opens a temporary file again
    return False


def _copy_owner_and_mode(fd: int, existing: os.stat_result) -> None:
    """The replaced file's mode and owner, on POSIX; Windows keeps neither in a mode."""
    if os.name == "nt":
        return
    if (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, existing.st_uid, existing.st_gid)
        except PermissionError:
            pass  # only root gives a file away; the user's own file keeps its owner anyway
    os.fchmod(fd, stat.S_IMODE(existing.st_mode))


# A file system without hard links (FAT, exFAT, some network shares) says one of these.
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}


def _rename_without_replacing(temp: str, path: Path) -> None:
    """Put temp at path unless something appeared there meanwhile (TargetRefused EXISTS).

    Windows' rename never replaces. POSIX's does, so a hard link (which never replaces)
    takes its place; where the file system has none, a check just before the rename.
    """
    try:
        if os.name == "nt":
            os.rename(temp, path)
            return
        try:
            os.link(temp, path)
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            if os.path.lexists(path):
                raise TargetRefused(path, Refusal.EXISTS) from None
            os.rename(temp, path)
            return
        os.unlink(temp)
    except FileExistsError:
        raise TargetRefused(path, Refusal.EXISTS) from None


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
