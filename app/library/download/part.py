"""One file's `<name>.part`: where its bytes land, their running SHA-256, the check and the rename."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from app.core.units import human_size
from app.library.download.errors import DownloadError, DownloadErrorKind

PartOpener = Callable[[Path], BinaryIO]
_BLOCK = 1024 * 1024


def open_for_append(path: Path) -> BinaryIO:
    return path.open("ab")


@dataclass(frozen=True)
class DownloadedFile:
    """A file of the unit, in place and checked; verified_sha256 False means size only."""

    name: str
    path: Path
    size: int
    sha256: str
    verified_sha256: bool
    verified_size: bool


class PartFile:
    """Holds a part's length and SHA-256 as written, so a resume need not read it again.

    The hash is caught up from the disk whenever the part's length is not what was
    hashed: after an app restart, or after a write that failed half-way.
    """

    def __init__(self, name: str, final: Path, opener: PartOpener) -> None:
        self.name = name
        self.final = final
        self.path = final.with_name(final.name + ".part")
        self._opener = opener
        self._digest = hashlib.sha256()
        self._hashed = 0
        self.length = self._on_disk()

    def exists(self) -> bool:
        return self.path.exists()

    def sync(self) -> int:
        """Read the part's length from the disk (another run may have left one)."""
        self.length = self._on_disk()
        return self.length

    def discard(self) -> None:
        """Start over: the part goes, with its hash."""
        self.path.unlink(missing_ok=True)
        self._digest, self._hashed, self.length = hashlib.sha256(), 0, 0

    def open(self) -> BinaryIO:
        """Open for appending, the hash caught up with what is already there."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._catch_up()
        return self._opener(self.path)

    def write(self, out: BinaryIO, block: bytes) -> None:
        out.write(block)
        self._digest.update(block)
        self._hashed += len(block)
        self.length += len(block)

    def verify(self, size: int | None, sha256: str | None, sha_source: str) -> DownloadedFile:
        """Check the complete part against what is known; a wrong one is deleted."""
        self.sync()
        self._catch_up()
        if size is not None and self.length != size:
            self._damaged(f"it is {human_size(self.length)} where the server said "
                          f"{human_size(size)}")
        digest = self._digest.hexdigest()
        if sha256 is not None and digest != sha256:
            self._damaged(f"its SHA-256 is not the one {sha_source} gives for it")
        return DownloadedFile(self.name, self.final, self.length, digest,
                              verified_sha256=sha256 is not None, verified_size=size is not None)

    def put_in_place(self) -> None:
        os.replace(self.path, self.final)

    def _catch_up(self) -> None:
        on_disk = self.sync()
        if on_disk == self._hashed:
            return
        digest = hashlib.sha256()
        if on_disk:
            with self.path.open("rb") as part:
                while block := part.read(_BLOCK):
                    digest.update(block)
        self._digest, self._hashed = digest, on_disk

    def _on_disk(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def _damaged(self, why: str) -> None:
        self.discard()
        raise DownloadError(DownloadErrorKind.DAMAGED,
                            f"{self.name} arrived damaged: {why}. It was deleted; download "
                            f"it again.")
