"""Reading and writing mcp.json and the tool choices as files another program may share or break.

mcp.json is often shared with Claude Desktop or Cursor through a link, and anything can sit at its
path: a named pipe (reading it would wait forever), a device (/dev/zero never ends), a file far
larger than any config, JSON nested past what Python's parser can recurse into. Each is refused
here in words (ConfigFileTrouble) before it costs more than a bounded read.
"""

from __future__ import annotations

import json
import os
import re
import stat
from itertools import accumulate
from pathlib import Path
from typing import Any

from app.core.files import write_atomically

# A config this size holds thousands of servers; a larger one is not a config Kestrel should parse.
LIMIT_BYTES = 1 << 20
# Claude Desktop's and Cursor's files are four or five levels deep; this leaves ample room for keys
# Kestrel keeps without knowing them, and stays far below Python's recursion limit on read and write.
DEPTH_LIMIT = 100
# A JSON string, written as "unrolled" so a megabyte-long one is one fast scan.
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


class ConfigFileTrouble(OSError):
    """The file is there but is not one Kestrel reads or writes; str() says why and what to do."""

    def __init__(self, words: str) -> None:
        super().__init__(words)
        self.words = self.strerror = words  # strerror: what `except OSError` handlers show

    def __str__(self) -> str:
        return self.words


class DamagedJson(ValueError):
    """The text is not JSON Kestrel can take (invalid, or nested too deep); str() says where or why."""


def read_text(path: Path) -> str | None:
    """The file's text (a link's target's), None when there is no file; ConfigFileTrouble for a pipe,
    a device, a folder, a file over LIMIT_BYTES or one that is not UTF-8; OSError when it cannot be read."""
    try:
        _check_kind(path, os.stat(path).st_mode)  # before opening: opening some devices does something
    except FileNotFoundError:
        return None
    # O_NONBLOCK: should a pipe take the file's place meanwhile, opening it does not wait for a writer.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    try:
        _check_kind(path, os.fstat(fd).st_mode)
        chunks: list[bytes] = []
        size = 0
        while size <= LIMIT_BYTES and (chunk := os.read(fd, LIMIT_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > LIMIT_BYTES:
        raise ConfigFileTrouble(f"{path} is larger than {LIMIT_BYTES // (1 << 20)} MB, far more than a list of "
                                "servers needs, so Kestrel did not read it. Check that it is the file you meant; "
                                "move it away to start again.")
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigFileTrouble(f"{path} is not UTF-8 text (byte {exc.start + 1} is not). Save it as UTF-8 in a "
                                "text editor.") from None


def parse_json(text: str) -> Any:
    """The JSON value, or DamagedJson saying where it is broken; nesting past DEPTH_LIMIT is refused
    before the parser, whose recursion it would exhaust, ever sees it."""
    depth = _depth(text)
    if depth > DEPTH_LIMIT:
        raise DamagedJson(f"it is nested {depth:,} levels deep; a config needs a handful, and Kestrel reads at "
                          f"most {DEPTH_LIMIT}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DamagedJson(f"line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:  # cannot happen below DEPTH_LIMIT; kept so that no traceback ever could
        raise DamagedJson("it is nested too deeply to read") from None


def write_through(path: Path, data: bytes) -> None:
    """Write the file whole (a temporary beside it, renamed over). Where path is a link (mcp.json
    shared with Claude Desktop or Cursor), the file it points to is written, in that file's folder,
    so the link stays a link; a link that loops or leads to no folder, or to a pipe or a device,
    is refused (ConfigFileTrouble) and nothing is written."""
    write_atomically(_target(path), data)


def _target(path: Path) -> Path:
    if not path.is_symlink():
        if path.exists() and not path.is_file():
            _check_kind(path, os.stat(path).st_mode)
        return path
    try:
        target = path.resolve()
    except (OSError, RuntimeError):  # a loop (RuntimeError before Python 3.13)
        target = path
    if target.is_symlink():
        raise ConfigFileTrouble(f"{path} is a link that leads back to itself, so Kestrel cannot tell which file to "
                                "write. Point it at a file, or remove it to start again.")
    if not target.parent.is_dir():
        raise ConfigFileTrouble(f"{path} is a link to {target}, whose folder does not exist. Point the link at a "
                                "file that exists, or remove it to start again.")
    if target.exists():
        _check_kind(target, os.stat(target).st_mode)
    return target


def _check_kind(path: Path, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    what = next((words for test, words in _KINDS if test(mode)), "not a regular file")
    raise ConfigFileTrouble(f"{path} is {what}, not a file, so Kestrel did not read or write it. Put a JSON file "
                            "there, or remove it to start again.")


def _depth(text: str) -> int:
    """How deep the brackets nest, strings left out: a linear scan with no recursion."""
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    return max(accumulate(1 if bracket in "[{" else -1 for bracket in brackets), default=0)
