"""Find a collection's documents in its folder: links followed only inside it, no loops, no hidden files."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.documents.opening import inside, outside_words
from app.documents.readers import format_of

# Folders of tools, not of the user's writing: a collection of a project leaves them out.
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "venv", "site-packages"})
_HIDDEN_OR_SYSTEM = getattr(stat, "FILE_ATTRIBUTE_HIDDEN", 2) | getattr(stat, "FILE_ATTRIBUTE_SYSTEM", 4)


@dataclass(frozen=True)
class FoundFile:
    """A document under the folder: its path relative to the folder (with "/"), size and mtime.
    `skipped`: why it is listed but never read (a link out of the folder), in the user's words."""

    relative: str
    size: int
    mtime_ns: int
    skipped: str = ""


def scan_folder(folder: Path, cancelled: Callable[[], bool] = lambda: False) -> dict[str, FoundFile]:
    """Every document under `folder`, keyed by its relative path.

    A link is followed only to where it stays inside `folder`: a link to a file in it is listed
    as that file; a link to a folder in it is left alone (that folder's files are found where they
    are). A link that leads out of it (a downloaded repository's link to ~/.ssh) is listed with
    `skipped` saying where it leads, and never read; so is a folder that resolves outside (a
    junction, or a folder swapped for a link since it was listed). A folder reached twice (a bind
    mount) is walked once, so nothing can make the walk endless; a broken or circular link is
    left out. Folders that cannot be listed are left out too: the files in them cannot be read."""
    found: dict[str, FoundFile] = {}
    root = os.path.realpath(folder)
    seen: set[tuple[int, int]] = set()
    pending = [(folder, "")]
    while pending and not cancelled():
        current, prefix = pending.pop()
        try:
            info = current.stat()
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            resolved = os.path.realpath(current)
            if prefix and not inside(resolved, root):
                relative = prefix.rstrip("/")
                found[relative] = FoundFile(relative, 0, current.lstat().st_mtime_ns, outside_words(resolved, True))
                continue
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            if _hidden(entry):
                continue
            try:
                if entry.is_symlink():
                    link = _link(entry, prefix, root)
                    if link is not None:
                        found[link.relative] = link
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIPPED_FOLDERS:
                        pending.append((Path(entry.path), f"{prefix}{entry.name}/"))
                    continue
                # What the reader does not read is left out, not listed as unreadable, so that a
                # source tree's images and binaries do not crowd the list.
                if format_of(Path(entry.name)) is None:
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:  # gone since the listing
                continue
            if stat.S_ISREG(info.st_mode):
                found[prefix + entry.name] = FoundFile(prefix + entry.name, info.st_size, info.st_mtime_ns)
    return found


def _link(entry: os.DirEntry[str], prefix: str, root: str) -> FoundFile | None:
    """A link as the scan lists it: the file it leads to inside the folder, a skipped entry when it
    leads out (to a document's name or to a folder), or None (a folder inside, not a document, broken)."""
    try:
        target = os.path.realpath(entry.path, strict=True)
        info = os.stat(target)
        link_info = entry.stat(follow_symlinks=False)
    except OSError:  # broken, or a loop
        return None
    relative = prefix + entry.name
    is_folder = stat.S_ISDIR(info.st_mode)
    document = stat.S_ISREG(info.st_mode) and format_of(Path(entry.name)) is not None
    if inside(target, root):
        return FoundFile(relative, info.st_size, info.st_mtime_ns) if document else None
    if is_folder or document:
        return FoundFile(relative, 0, link_info.st_mtime_ns, outside_words(target, is_folder))
    return None


def _hidden(entry: os.DirEntry[str]) -> bool:
    """Dot files and folders everywhere; on Windows also those marked hidden or system."""
    if entry.name.startswith(".") or entry.name.startswith("~$"):  # ~$: Office's lock files
        return True
    if sys.platform == "win32":
        try:
            return bool(entry.stat(follow_symlinks=False).st_file_attributes & _HIDDEN_OR_SYSTEM)
        except OSError:
            return True
    return False
