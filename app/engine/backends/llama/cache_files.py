"""Files in a folder anyone may have put things in: read regular files only, never block, remove safely."""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO

# The per-install key that signs saved chat states (app/engine/backends/llama/kv_state.py), in the data folder.
SECRET_NAME = "chat-states.key"
SECRET_BYTES = 32


def open_regular(path: Path) -> BinaryIO | None:
    """path opened for reading if it is a regular file (not a link, FIFO, device or folder),
    else None. It never waits: a FIFO is refused before it is opened, and opened without
    waiting for a writer if it took the file's place in between."""
    try:
        before = os.lstat(path)
        if not stat.S_ISREG(before.st_mode):
            return None
        descriptor = os.open(path, _read_flags())
    except OSError:
        return None
    try:
        after = os.fstat(descriptor)
        # The same regular file lstat saw: not one a link or a rename put there since.
        if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            os.close(descriptor)
            return None
        return os.fdopen(descriptor, "rb")
    except OSError:
        os.close(descriptor)
        return None


def _read_flags() -> int:
    """os.open's flags for open_regular.

    POSIX: O_NOFOLLOW (a link is refused, never followed) and O_NONBLOCK (a FIFO opens at
    once instead of waiting for a writer; it changes nothing for a regular file). Windows
    has neither: there the lstat before opening and the fstat after, which must name the
    same regular file, stand for them, and a FIFO cannot be made in a folder at all
    (named pipes live under \\\\.\\pipe\\).
    """
    if sys.platform == "win32":
        return os.O_RDONLY | os.O_BINARY
    return os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK


def is_regular(path: Path) -> bool:
    """A regular file itself, not a link to one."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def remove(path: Path) -> None:
    """Remove a file, a link (never what it points to) or a FIFO; leave folders; never raise."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
    except OSError:
        pass


def lstat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def bounded_json(raw: bytes, max_depth: int) -> object | None:
    """The JSON value in raw, or None when it is not JSON, nests deeper than max_depth
    (Python's parser recurses: 400,000 brackets raised RecursionError) or holds NaN or
    Infinity. The caller bounds raw's size."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if _depth(text) > max_depth:
        return None
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return None


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects in text, brackets inside strings not counted."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not a number a header holds")


def make_temporary(folder: Path, prefix: str) -> tuple[int, Path]:
    """A new file of its own in folder (created exclusively: never an existing file or a
    link someone planted under a name Kestrel would use), ending in .tmp."""
    descriptor, name = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".tmp")
    return descriptor, Path(name)


def install_secret(folder: Path) -> bytes | None:
    """This install's key for signing saved states, made on first use: SECRET_BYTES random
    bytes in folder/SECRET_NAME (the data folder, not the cache the states are in). None
    when it cannot be read or made (the states then stay in RAM)."""
    path = folder / SECRET_NAME
    key = _read_secret(path)
    if key is not None:
        return key
    try:
        folder.mkdir(parents=True, exist_ok=True)
        remove(path)  # a damaged key, or something that is not a file: a new key replaces it
        descriptor, temporary = make_temporary(folder, f".{SECRET_NAME}.")
        try:
            with os.fdopen(descriptor, "wb") as file:
                file.write(secrets.token_bytes(SECRET_BYTES))
                file.flush()
                os.fsync(file.fileno())
            _put_in_place(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
    except OSError:
        return None
    return _read_secret(path)


def _put_in_place(temporary: Path, path: Path) -> None:
    """temporary under path's name unless another process made the key first (its key wins)."""
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links
        if not os.path.lexists(path):
            os.replace(temporary, path)


def _read_secret(path: Path) -> bytes | None:
    file = open_regular(path)
    if file is None:
        return None
    with file:
        key = file.read(SECRET_BYTES + 1)
    return key if len(key) == SECRET_BYTES else None
