"""Writing a small file so that it is always either the old one or the new one, never torn."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
