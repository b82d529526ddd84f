"""A download's own files, opened without following links: a part is a regular file Kestrel
owns with one name, or it is not written to.

POSIX opens with O_NOFOLLOW (a link at the name fails the open) and O_NONBLOCK (a FIFO
fails the open rather than waiting for a reader), then checks the open file itself with
fstat: a regular file, one name, owned by this user. Windows has no O_NOFOLLOW: there
the name is checked with lstat for a link or any other reparse point (a junction, a
mount point) just before the open, and the open file is checked with fstat the same way,
less the owner (Windows reports no owner there). Between that check and the open, a link
put in place by a program racing Kestrel could still be followed on Windows; on POSIX no
such window exists.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from enum import Enum
from pathlib import Path
from typing import BinaryIO

_REPARSE_POINT = getattr(stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0x400)
_WINDOWS = sys.platform == "win32"


class Found(Enum):
    """What is at a part's name, looked at without following it."""

    NOTHING = "nothing"
    OURS = "ours"          # a regular file this user owns, with no other name
    NAME_ONLY = "name"     # a link, a FIFO, a device, a socket, or a second name of a file:
    #                        removing the name leaves whatever it leads to as it was
    FOLDER = "folder"
    OTHERS = "others"      # a regular file another user owns


class NotOurFile(OSError):
    """The name held something other than a regular file of ours when it was opened."""


def look_at(path: Path) -> Found:
    """What is at path, never following a link."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return Found.NOTHING
    if is_link(info):
        return Found.NAME_ONLY
    if stat.S_ISDIR(info.st_mode):
        return Found.FOLDER
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        return Found.NAME_ONLY
    return Found.OURS if _owned(info) else Found.OTHERS


def is_link(info: os.stat_result) -> bool:
    """A symbolic link, or on Windows any reparse point (a junction leads elsewhere too)."""
    return stat.S_ISLNK(info.st_mode) or bool(getattr(info, "st_file_attributes", 0) & _REPARSE_POINT)


def open_regular(path: Path, append: bool) -> BinaryIO:
    """Open a regular file of ours for appending (created if missing) or for reading.

    NotOurFile when the name holds a link, a FIFO, a device, a folder or a file with a
    second name, or one another user owns.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT if append else os.O_RDONLY
    fd = _open_windows(path, flags) if _WINDOWS else _open_posix(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or not _owned(info):
            raise NotOurFile(errno.EPERM, "not a regular file of ours", str(path))
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "ab" if append else "rb")


def _open_posix(path: Path, flags: int) -> int:
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        # ELOOP: a symbolic link (EMLINK on FreeBSD); ENXIO: a FIFO with no reader.
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENXIO):
            raise NotOurFile(exc.errno, "a link or a FIFO", str(path)) from None
        raise
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_windows(path: Path, flags: int) -> int:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None and (is_link(info) or not stat.S_ISREG(info.st_mode)):
        raise NotOurFile(errno.EPERM, "a link or not a file", str(path))
    return os.open(path, flags | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOINHERIT", 0), 0o666)


def _owned(info: os.stat_result) -> bool:
    """Owned by this user; Windows' stat reports no owner, so there every file passes."""
    if _WINDOWS:
        return True
    return info.st_uid == os.geteuid()
