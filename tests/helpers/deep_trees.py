"""Folder trees too deep or too long for Python's own tools: made and removed one level at a
time, through folder descriptors (POSIX only), since pathlib's mkdir(parents=True),
os.makedirs and Python 3.11's shutil.rmtree recurse once per level."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def deep_folder(top: Path, levels: int, name: str = "d") -> Path:
    """top/d/d/.../d, levels deep."""
    folder = top
    for _ in range(levels):
        folder = folder / name
        folder.mkdir()
    return folder


def long_path_folder(top: Path, length: int) -> Path:
    """A folder whose full path is `length` characters (under Linux's 4,096): its own path
    opens, but a file inside it does not. Made through folder descriptors, since the
    folders on the way are themselves too long to name from the top."""
    name = "x" * 100
    folder, fd = top, os.open(top, os.O_RDONLY)
    try:
        while len(str(folder / name)) < length - 100:  # the last x folder stays openable, with room inside
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd, folder = inner, folder / name
        last = "y" * (length - len(str(folder)) - 1)  # 100 to 200 characters
        os.mkdir(last, dir_fd=fd)
    finally:
        os.close(fd)
    return folder / last


def remove_tree(top: Path) -> None:
    """Remove top and everything below it, however deep or long its paths, bottom up,
    without following links."""
    if not top.exists():
        return
    # (descriptor of a folder, its name in the folder before it in the list)
    opened: list[tuple[int, str]] = [(os.open(top, os.O_RDONLY), "")]
    try:
        while opened:
            fd, _ = opened[-1]
            deeper = None
            with os.scandir(fd) as listing:
                entries = list(listing)
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    deeper = entry.name
                    break
                os.unlink(entry.name, dir_fd=fd)
            if deeper is not None:
                opened.append((os.open(deeper, os.O_RDONLY, dir_fd=fd), deeper))
                continue
            os.close(fd)
            _, name = opened.pop()
            if opened:
                os.rmdir(name, dir_fd=opened[-1][0])
    finally:
        for fd, _ in opened:
            os.close(fd)
    shutil.rmtree(top, ignore_errors=True)
