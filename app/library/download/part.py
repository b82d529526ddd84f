"""One file's `<name>.part`: where its bytes land, their running SHA-256, the check and the rename.

The part and the folders above it (up to the unit's folder) are looked at without
following links before anything is written: a link, a FIFO, a device or a second name
of another file at the part's name is removed (the name only, never what it leads to)
and the file starts over; a folder, or a file another user owns, is refused in words.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Callable, NoReturn

from app.core.units import human_size
from app.library.download import resume
from app.library.download.errors import DownloadError, DownloadErrorKind
from app.library.download.nofollow import Found, NotOurFile, is_link, look_at, open_regular

PartOpener = Callable[[Path], BinaryIO]
_BLOCK = 1024 * 1024


def open_for_append(path: Path) -> BinaryIO:
    """The part, opened for appending without following a link (see nofollow)."""
    return open_regular(path, append=True)


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

    def __init__(self, name: str, root: Path, opener: PartOpener) -> None:
        self.name = name
        self.root = root
        self.final = root.joinpath(*PurePosixPath(name).parts)
        self.path = self.final.with_name(self.final.name + ".part")
        self._opener = opener
        self._digest = hashlib.sha256()
        self._hashed = 0
        self.length = self._on_disk()

    def make_safe(self) -> None:
        """Make sure nothing but a part of ours is at the part's name (and beside it)."""
        self._check_folders(create=False)
        for path in (self.path, resume.facts_path(self.path)):
            found = look_at(path)
            if found is Found.NAME_ONLY:
                path.unlink()
            elif found in (Found.FOLDER, Found.OTHERS):
                raise self._not_ours(path, found)
        self.sync()

    def exists(self) -> bool:
        return look_at(self.path) is Found.OURS

    def sync(self) -> int:
        """Read the part's length from the disk (another run may have left one)."""
        self.length = self._on_disk()
        return self.length

    def discard(self) -> None:
        """Start over: the part goes, with its hash and what it was started from (never a
        file another user owns, and nothing below a folder that is a link)."""
        if self._folder_problem(create=False) is None:
            if look_at(self.path) in (Found.OURS, Found.NAME_ONLY):
                self.path.unlink(missing_ok=True)
            resume.forget(self.path)
        self._digest, self._hashed, self.length = hashlib.sha256(), 0, 0

    def open(self) -> BinaryIO:
        """Open for appending, the hash caught up with what is already there."""
        self._check_folders(create=True)
        self.make_safe()
        self._catch_up()
        try:
            return self._opener(self.path)
        except NotOurFile:  # replaced between the look and the open: a program racing Kestrel
            raise self._not_ours(self.path, look_at(self.path)) from None

    def write(self, out: BinaryIO, block: bytes) -> None:
        out.write(block)
        self._digest.update(block)
        self._hashed += len(block)
        self.length += len(block)

    def verify(self, size: int | None, sha256: str | None, sha_source: str) -> DownloadedFile:
        """Check the complete part against what is known; a wrong one is deleted."""
        self.make_safe()
        self._catch_up()
        if size is not None and self.length != size:
            self.damaged(f"it is {human_size(self.length)} where the server said "
                         f"{human_size(size)}")
        digest = self._digest.hexdigest()
        if sha256 is not None and digest != sha256:
            self.damaged(f"its SHA-256 is not the one {sha_source} gives for it")
        return DownloadedFile(self.name, self.final, self.length, digest,
                              verified_sha256=sha256 is not None, verified_size=size is not None)

    def put_in_place(self) -> None:
        """Rename the checked part to its name; the file beside it is no longer needed."""
        self._check_folders(create=False)
        if look_at(self.path) is not Found.OURS:
            raise self._not_ours(self.path, look_at(self.path))
        try:
            os.replace(self.path, self.final)
        except OSError as exc:
            raise DownloadError(DownloadErrorKind.DISK_ERROR,
                                f"Could not put {self.name} in place in {self.root}: "
                                f"{exc.strerror or exc}. Fix that, then start the download "
                                f"again.") from None
        resume.forget(self.path)

    def damaged(self, why: str) -> NoReturn:
        """The part is not the file: it goes, and the download fails in words."""
        self.discard()
        raise DownloadError(DownloadErrorKind.DAMAGED,
                            f"{self.name} arrived damaged: {why}. It was deleted; download "
                            f"it again.")

    def read_back(self, take: Callable[[bytes], bool]) -> None:
        """Hand the part's bytes, from the first, to take until it returns False or the
        part ends (a resumed .gguf file's header is read again from them)."""
        left = self.sync()
        if not left:
            return
        try:
            with open_regular(self.path, append=False) as part:
                while left and (block := part.read(min(_BLOCK, left))):
                    left -= len(block)
                    if not take(block):
                        return
        except NotOurFile:
            raise self._not_ours(self.path, look_at(self.path)) from None

    def _catch_up(self) -> None:
        on_disk = self.sync()
        if on_disk == self._hashed:
            return
        digest = hashlib.sha256()
        if on_disk:
            try:
                with open_regular(self.path, append=False) as part:
                    while block := part.read(_BLOCK):
                        digest.update(block)
            except NotOurFile:
                raise self._not_ours(self.path, look_at(self.path)) from None
        self._digest, self._hashed = digest, on_disk

    def _on_disk(self) -> int:
        """The part's length; 0 for anything at its name that is not a part of ours."""
        try:
            return os.lstat(self.path).st_size if look_at(self.path) is Found.OURS else 0
        except FileNotFoundError:
            return 0

    def _check_folders(self, create: bool) -> None:
        """The folders from the unit's folder down to the part: none of them may be a link
        (the models folder above may be: users move it that way). create makes missing ones."""
        where = self._folder_problem(create)
        if where is not None:
            raise DownloadError(DownloadErrorKind.DISK_ERROR,
                                f"Could not write {self.name}: {where} is a link or a file "
                                f"where Kestrel needs a folder of its own, and Kestrel writes "
                                f"only inside the model's folder {self.root}. Move it away, then "
                                f"start the download again.")

    def _folder_problem(self, create: bool) -> Path | None:
        """The first folder on the way to the part that is a link or not a folder, if any."""
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        where = self.root
        for name in ("", *PurePosixPath(self.name).parts[:-1]):
            where = where / name if name else where
            if create and name:
                try:
                    where.mkdir()
                except FileExistsError:
                    pass
            try:
                info = os.lstat(where)
            except FileNotFoundError:
                return None  # nothing below a missing folder exists yet either
            if is_link(info) or not stat.S_ISDIR(info.st_mode):
                return where
        return None

    def _not_ours(self, path: Path, found: Found) -> DownloadError:
        what = ("a folder" if found is Found.FOLDER else "a file another user of this computer owns"
                if found is Found.OTHERS else "not a file Kestrel wrote")
        return DownloadError(DownloadErrorKind.DISK_ERROR,
                             f"Could not continue downloading {self.name}: {path} is {what}, so "
                             f"Kestrel neither writes to it nor deletes it. Move it elsewhere, "
                             f"then start the download again.")
