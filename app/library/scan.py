"""Finding models in a folder the user names: GGUF files (split ones as one model) and ONNX GenAI folders."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from app.core.files import kind_of
from app.library.model_files.gguf_info import ModelFileError, read_gguf_info
from app.library.installed import InstalledModel
from app.library.model_files.model_format import GENAI_CONFIG, ModelFormat, read_onnx_folder
from app.library.projector import is_projector, not_a_model, projector_beside

# Called with the number of folders looked in so far and the one being looked in now.
ScanProgress = Callable[[int, Path], None]
# llama.cpp's gguf-split names its parts "<name>-00001-of-00003.gguf".
_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<number>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
# What a download or a copy still under way is called; never a model yet.
_UNFINISHED = (".part", ".partial", ".crdownload", ".download", ".tmp")
# How many folders down a scan looks. Models sit a few folders down at most; a tree far
# deeper is a loop of folders or a trap, and a path that long no longer opens on Windows.
MAX_DEPTH = 100
_FILE, _FOLDER = "file", "folder"


class ScanCancelled(Exception):
    """The user stopped the scan; nothing it found was added."""


@dataclass(frozen=True)
class Found:
    """A model the scan found: its file (a split GGUF's first part) or ONNX folder."""

    path: Path
    title: str
    size: int
    format: ModelFormat
    files: tuple[Path, ...] = ()   # every part of a split GGUF; () for one file or a folder
    projector: Path | None = None  # the vision projector beside it the library pairs it with


@dataclass(frozen=True)
class FolderScan:
    """What "Add a folder" did: models it now references, ones already in the library, and
    what it passed over with why."""

    added: tuple[InstalledModel, ...]
    known: tuple[InstalledModel, ...]
    skipped: tuple[tuple[Path, str], ...]


@dataclass
class ScanResult:
    """What a scan saw: models, paths it was told it already knows, and what it passed over, why."""

    found: list[Found] = field(default_factory=list)
    known: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def split_part(path: Path) -> tuple[str, int, int] | None:
    """(stem, number, count) for a part of a split GGUF, else None."""
    match = _SPLIT.match(path.name)
    if match is None:
        return None
    number, count = int(match["number"]), int(match["count"])
    if not 1 <= number <= count:
        return None
    return match["stem"], number, count


def split_files(first: Path) -> tuple[Path, ...]:
    """Every part a split GGUF's first part names, in order (whether there or not); () if not split."""
    part = split_part(first)
    if part is None or part[1] != 1:
        return ()
    stem, _, count = part
    digits = len(first.name.rsplit("-of-", 1)[1].split(".")[0])
    return tuple(first.with_name(f"{stem}-{n:0{digits}d}-of-{count:0{digits}d}{first.suffix}")
                 for n in range(1, count + 1))


def scan_folder(folder: Path, *, known: Iterable[Path] = (), recursive: bool = True,
                progress: ScanProgress | None = None,
                cancelled: Callable[[], bool] | None = None) -> ScanResult:
    """Look through folder (and, if recursive, the folders below it, down to MAX_DEPTH
    levels) for models.

    Paths in known (resolved) are reported as known without being read again. Links to
    folders are followed, but a folder is looked in once, so a loop of links ends. What
    cannot be read (a loop of links, a path too long, a folder that may not be read or
    went away) is skipped with why, and the scan goes on. ScanCancelled when cancelled()
    turns true.
    """
    scan = _Scan({_resolved(p) for p in known}, recursive, progress, cancelled)
    try:
        is_model = _has_genai_config(folder)
    except OSError as exc:
        scan.result.skipped.append((folder, _unreadable(folder, exc)))
        return scan.result
    if is_model:
        scan.onnx(folder)  # the folder named is itself a model
    else:
        scan.walk(folder)
    return scan.result


class _Scan:
    def __init__(self, known: set[Path], recursive: bool, progress: ScanProgress | None,
                 cancelled: Callable[[], bool] | None) -> None:
        self.known = known
        self.recursive = recursive
        self.progress = progress
        self.cancelled = cancelled
        self.result = ScanResult()
        self.seen: set[tuple[int, int]] = set()

    def walk(self, top: Path) -> None:
        """Each folder's files, then each folder in it with all below, in name order, as a
        recursive walk would go; but on a stack of its own, so no depth (a folder 1,500
        levels down) runs out of Python's recursion limit."""
        pending: list[tuple[Path, int]] = [(top, 0)]
        while pending:
            folder, depth = pending.pop()
            if depth == 0 or self._enter(folder, top, depth):
                below = self.folder(folder)
                pending.extend((child, depth + 1) for child in reversed(below))

    def folder(self, folder: Path) -> list[Path]:
        """Look at the files in folder; the folders in it, to look in next."""
        if self.cancelled is not None and self.cancelled():
            raise ScanCancelled(f"The scan of {folder} was stopped; nothing was added.")
        try:
            status = folder.stat()
            if (status.st_dev, status.st_ino) in self.seen:
                return []  # a link back to a folder already looked in
            self.seen.add((status.st_dev, status.st_ino))
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: Path(entry.path))
        except OSError as exc:
            self.result.skipped.append((folder, _unreadable(folder, exc)))
            return []
        if self.progress is not None:
            self.progress(len(self.seen), folder)
        files: list[Path] = []
        folders: list[Path] = []
        for entry in entries:
            kind = self._kind(entry)
            if kind == _FILE:
                files.append(Path(entry.path))
            elif kind == _FOLDER:
                folders.append(Path(entry.path))
        self._files(files)
        return folders

    def _kind(self, entry: os.DirEntry[str]) -> str | None:
        """_FILE, _FOLDER (links followed), or None for what is neither; said when it
        matters: a loop of links, a .gguf that is a FIFO or a device, a folder or a .gguf
        that cannot be looked at or went away since the listing."""
        child = Path(entry.path)
        try:
            mode = entry.stat().st_mode
        except OSError as exc:
            said = exc.errno != errno.ENOENT or entry.is_dir(follow_symlinks=False) or _looks_like_gguf(child)
            if said:  # else a file, or a link to one, not there: nothing to say of what is not a model
                self.result.skipped.append((child, _unreadable(child, exc)))
            return None
        if stat.S_ISREG(mode):
            return _FILE
        if stat.S_ISDIR(mode):
            return _FOLDER
        if _looks_like_gguf(child):  # never opened: a FIFO would wait for a writer forever
            self.result.skipped.append((child, f"not a regular file ({kind_of(mode)}), so not a model"))
        return None

    def _enter(self, child: Path, top: Path, depth: int) -> bool:
        """Whether to look in child, a folder depth levels below top; a model folder is taken here."""
        if child.name.startswith("."):
            self.result.skipped.append((child, "a hidden folder"))
            return False
        if child.name.lower().endswith(_UNFINISHED):
            self.result.skipped.append((child, "a download or copy that has not finished"))
            return False
        try:
            is_model = _has_genai_config(child)
        except OSError as exc:
            self.result.skipped.append((child, _unreadable(child, exc)))
            return False
        if is_model:
            self.onnx(child)  # a model's own folder: nothing else is inside
            return False
        if depth > MAX_DEPTH:
            self.result.skipped.append((child, f"it is more than {MAX_DEPTH} folders below {top}, deeper "
                                               "than Kestrel looks; add that folder itself to look in it"))
            return False
        return self.recursive

    def onnx(self, path: Path) -> None:
        if _resolved(path) in self.known:
            self.result.known.append(path)
        else:
            self._examined(path)

    def _examined(self, path: Path) -> None:
        try:
            self.result.found.append(examine(path))
        except ModelFileError as exc:
            said = exc.message if exc.kind != "projector" else \
                "a vision projector, which goes with the model beside it (it is not a model of its own)"
            self.result.skipped.append((path, said))
        except OSError as exc:
            self.result.skipped.append((path, f"it could not be read: {exc.strerror or exc}"))

    def _files(self, files: list[Path]) -> None:
        names = {f.name for f in files}
        for file in files:
            lowered = file.name.lower()
            if lowered.endswith(tuple(".gguf" + end for end in _UNFINISHED)):
                self.result.skipped.append((file, "a download or copy that has not finished"))
            elif not lowered.endswith(".gguf"):
                continue  # not a model; said of no file, or a scan of a home folder says thousands
            elif file.name.startswith("."):
                # macOS leaves "._name.gguf" beside files on FAT and exFAT drives: not a model.
                self.result.skipped.append((file, "a hidden file"))
            else:
                self._gguf(file, names)

    def _gguf(self, file: Path, names: set[str]) -> None:
        part = split_part(file)
        if part is not None and part[1] != 1:
            self._first_part_missing(file, part, names)
            return  # else looked at with its first part
        if _resolved(file) in self.known:
            self.result.known.append(file)
        elif not any(p.name not in names for p in split_files(file)):
            self._examined(file)
        else:  # say which part is missing without opening any
            absent = next(p for p in split_files(file) if p.name not in names)
            self.result.skipped.append((file, _missing_part(absent)))

    def _first_part_missing(self, file: Path, part: tuple[str, int, int], names: set[str]) -> None:
        """Say once, at the lowest part there, that a split GGUF's first part is not."""
        stem, number, count = part
        first = split_files(file.with_name(f"{stem}-{1:05d}-of-{count:05d}.gguf"))
        present = [p for p in first if p.name in names]
        if first and first[0].name not in names and present and present[0].name == file.name:
            self.result.skipped.append((file, _missing_part(first[0])))


def examine(path: Path) -> Found:
    """What model path is: an ONNX GenAI folder, a GGUF file, or a split GGUF (any of its
    parts named: the model is then all of them). ModelFileError says why it is none."""
    if path.is_dir():
        info = read_onnx_folder(path)
        size = _folder_size(path)
        return Found(path, f"{path.name} (ONNX, {info.model_type})", size, "onnx")
    part = split_part(path)
    if part is not None:
        path = path.with_name(f"{part[0]}-00001-of-{part[2]:05d}{path.suffix}")
    parts = split_files(path)
    absent = [p for p in parts if not p.is_file()]
    if absent:
        raise ModelFileError("missing", absent[0], f"{path.name} is one part of a split model, and "
                             f"{_missing_part(absent[0])}. Put every part in the same folder, "
                             "then add it again.")
    infos = [read_gguf_info(p) for p in (parts or (path,))]
    if is_projector(infos[0]):
        raise not_a_model(path)
    title = infos[0].name or (part[0] if part else path.stem)
    projector = projector_beside(infos[0], parts)
    return Found(path, title, sum(i.file_size for i in infos), "gguf", parts,
                 projector.path if projector is not None else None)


def _missing_part(absent: Path) -> str:
    number = split_part(absent)
    which = f"part {number[1]} of {number[2]}" if number else "a part"
    return f"{which} ({absent.name}) is missing"


def _folder_size(folder: Path) -> int:
    """The bytes of the files in folder and every folder below it (links to folders not
    followed, as rglob does not): on a stack, so a deep tree inside an ONNX model folder
    cannot exhaust Python's recursion limit."""
    total, pending = 0, [folder]
    while pending:
        below = pending.pop()
        try:
            with os.scandir(below) as listing:
                entries = list(listing)
        except OSError:
            if below == folder:
                raise
            continue  # as rglob: a folder inside that cannot be listed adds nothing
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif entry.is_file():
                    total += entry.stat().st_size
            except OSError:
                continue  # a loop of links, or gone since the listing: no bytes to count
    return total


def _has_genai_config(folder: Path) -> bool:
    """Whether folder is an ONNX GenAI model's; OSError when that cannot be told (a path
    too long, a folder that may not be looked into), which Path.is_file would raise for
    some errors and hide for others."""
    try:
        return stat.S_ISREG((folder / GENAI_CONFIG).stat().st_mode)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return False
        raise


def _resolved(path: Path) -> Path:
    """path with its links followed; as it is written where they cannot be (a loop of links)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: Python 3.11's word for a loop of links
        return path.absolute()


def _looks_like_gguf(path: Path) -> bool:
    return path.name.lower().endswith(".gguf")


def _is_link(path: Path) -> bool:
    try:
        return path.is_symlink()
    except OSError:
        return False


def _unreadable(path: Path, exc: OSError) -> str:
    """Why path could not be read, in the user's words."""
    if exc.errno == errno.ELOOP:
        return "a link that leads back to itself (a loop of links), so there is nothing there to read"
    if exc.errno == errno.ENAMETOOLONG:
        return (f"its path is too long to open ({len(str(path)):,} characters and more inside it); "
                "move it nearer the top of the drive to add what is in it")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "it could not be read: permission denied (your user may not open it)"
    if exc.errno == errno.ENOENT:
        if _is_link(path):
            return "a link to something that is not there"
        return "it went away while Kestrel was looking through the folder"
    return f"it could not be read: {exc.strerror or exc}"
