"""Copy files into the library with a running checksum, progress and cancel."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, Sequence

Progress = Callable[[int, int], None]
Cancelled = Callable[[], bool]
_BLOCK = 4 * 1024 * 1024


class CopyCancelled(Exception):
    """The user cancelled; the partial file is gone."""


def copy_hashed(sources: Sequence[Path], target: Path, progress: Progress | None = None,
                cancelled: Cancelled | None = None) -> str:
    """Concatenate sources into target; returns the sha256 of what was written.

    On cancel (CopyCancelled) or a disk error (OSError) the target is removed, so a
    cut-off copy never stays behind looking like a model.
    """
    total = sum(source.stat().st_size for source in sources)
    digest = hashlib.sha256()
    done = 0
    try:
        with target.open("wb") as out:
            for source in sources:
                with source.open("rb") as src:
                    while block := src.read(_BLOCK):
                        if cancelled is not None and cancelled():
                            raise CopyCancelled()
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        if progress is not None:
                            progress(done, total)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return digest.hexdigest()
