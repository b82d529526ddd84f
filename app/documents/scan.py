"""Find a collection's documents in its folder: no links followed into folders, no loops, no hidden files."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.documents.kinds import file_kind

# Folders of tools, not of the user's writing: a collection of a project leaves them out.
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "venv", "site-packages"})
_HIDDEN_OR_SYSTEM = getattr(stat, "FILE_ATTRIBUTE_HIDDEN", 2) | getattr(stat, "FILE_ATTRIBUTE_SYSTEM", 4)


@dataclass(frozen=True)
class FoundFile:
    """A document under the folder: its path relative to the folder (with "/"), size and mtime."""

    relative: str
    size: int
    mtime_ns: int


def scan_folder(folder: Path, cancelled: Callable[[], bool] = lambda: False) -> dict[str, FoundFile]:
    """Every document under `folder`, keyed by its relative path.

    Links to folders are never followed, and a folder reached twice (a bind mount, a
    junction) is walked once, so a loop cannot make the walk endless. A link to a file is
    followed to its file; a broken or circular link is left out. Folders that cannot be
    listed are left out too: the files in them cannot be read either."""
    found: dict[str, FoundFile] = {}
    seen: set[tuple[int, int]] = set()
    pending = [(folder, "")]
    while pending and not cancelled():
        current, prefix = pending.pop()
        try:
            info = current.stat()
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            if _hidden(entry):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIPPED_FOLDERS:
                        pending.append((Path(entry.path), f"{prefix}{entry.name}/"))
                    continue
                # What the reader does not read is left out, not listed as unreadable, so that a
                # source tree's images and binaries do not crowd the list.
                if file_kind(Path(entry.name)) is None:
                    continue
                info = entry.stat(follow_symlinks=True)
            except OSError:  # a broken or circular link, or gone since the listing
                continue
            if stat.S_ISREG(info.st_mode):
                found[prefix + entry.name] = FoundFile(prefix + entry.name, info.st_size, info.st_mtime_ns)
    return found


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
