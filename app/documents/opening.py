"""Opening a document to read it: only a regular file, and in a collection never through a link out of its folder."""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO

from app.documents.refusal import Refused
from app.documents.values import UnreadableCause as Cause, printable

# O_NONBLOCK: a pipe that took a document's name is opened at once (then refused by its type),
# instead of waiting for a writer that never comes.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # not on Windows: there the resolved path and a look after the open stand


def inside(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or under it; both already resolved (os.path.realpath)."""
    path, folder = os.path.normcase(path), os.path.normcase(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def outside_words(target: str, is_folder: bool) -> str:
    """Why a link in a collection's folder is not followed, naming where it leads."""
    if is_folder:
        return (f"a link to the folder {printable(target)}, outside the collection's folder: Kestrel does not follow "
                "links out of the folder you chose. Add that folder as a collection of its own to search it")
    return (f"a link to {printable(target)}, outside the collection's folder: Kestrel reads only the files inside "
            "the folder you chose. Copy the file into the folder to search it")


def open_document(path: Path, within: Path | None = None) -> BinaryIO:
    """`path` opened for reading, once it is known to be a regular file (else Refused).

    With `within` (a collection's folder, the reader's FolderFiles), `path` is resolved first and
    refused when it leads outside `within`; it is then opened by that resolved path, without
    following a link at its end (O_NOFOLLOW), and the file actually opened is looked at again. A
    file or a folder on the way swapped for a link between the check and the open (another program
    writing in the folder) is refused too, never followed out. OSError as the system says it
    (a link loop: ELOOP; gone: ENOENT)."""
    target, root = str(path), None
    if within is not None:
        root = os.path.realpath(within, strict=True)
        target = os.path.realpath(path, strict=True)
        if not inside(target, root):
            raise Refused(Cause.OUTSIDE_FOLDER, outside_words(target, os.path.isdir(target)))
    if not stat.S_ISREG(os.stat(target).st_mode):  # a device is never opened: opening one can act
        raise Refused(Cause.NOT_A_DOCUMENT, "not a regular file (a folder, a device or a pipe)")
    try:
        descriptor = os.open(target, _READ_FLAGS | (_NO_FOLLOW if root is not None else 0))
    except OSError as error:
        # ELOOP (EMLINK on the BSDs): O_NOFOLLOW met a link where the check saw none.
        if root is not None and error.errno in (errno.ELOOP, errno.EMLINK) and not _is_loop(target):
            raise Refused(Cause.OUTSIDE_FOLDER, _changed_words(target)) from None
        raise
    try:
        if root is not None and not _opened_inside(descriptor, target, root):
            raise Refused(Cause.OUTSIDE_FOLDER, _changed_words(target))
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise Refused(Cause.NOT_A_DOCUMENT, "not a regular file (a folder, a device or a pipe)")
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def _opened_inside(descriptor: int, target: str, root: str) -> bool:
    """Whether the file open at `descriptor` lies inside `root`: its path as the system names the
    open file where it can (Linux, macOS), else the resolved path again and the same file there."""
    opened = _opened_path(descriptor)
    if opened is not None:
        return inside(opened.removesuffix(" (deleted)"), root)
    try:
        again = os.path.realpath(target, strict=True)
        return inside(again, root) and os.path.samestat(os.stat(again), os.fstat(descriptor))
    except OSError:
        return False


def _opened_path(descriptor: int) -> str | None:
    if sys.platform.startswith("linux"):
        try:
            return os.readlink(f"/proc/self/fd/{descriptor}")
        except OSError:
            return None
    if sys.platform == "darwin":
        import fcntl
        try:
            named = fcntl.fcntl(descriptor, fcntl.F_GETPATH, bytes(1024))
        except OSError:
            return None
        return os.fsdecode(named.split(b"\0", 1)[0])
    return None


def _is_loop(target: str) -> bool:
    try:
        os.stat(target)
    except OSError as error:
        return error.errno == errno.ELOOP
    return False


def _changed_words(target: str) -> str:
    try:
        now = f" (to {printable(os.path.realpath(target))})"
    except OSError:
        now = ""
    return (f"it became a link{now} while Kestrel read it, outside the collection's folder: it was not read. "
            "Kestrel looks at it again at the next scan")
