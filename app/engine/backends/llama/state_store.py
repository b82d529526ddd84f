"""Saved conversation states: the last few in RAM, more on disk, both bounded, least recently used out."""

from __future__ import annotations

import os
import queue
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from app.engine.backends.llama import cache_files, kv_state
from app.engine.backends.llama.kv_state import StateHeader, StateKey

RAM_BUDGET = 512 * 1024 * 1024
RAM_ENTRIES = 6
# A saved state must save at least this many tokens over what the context already
# holds: below it, evaluating them costs less than reading a file.
MIN_GAIN = 32
# A temporary file this old is left from a writer that crashed.
STALE_TEMPORARY_S = 600
# A load looks at no more folder entries than this: the scan's time stays bounded
# whatever was put in the folder.
MAX_SCANNED = 10_000


@dataclass
class _Entry:
    tokens: tuple[int, ...]
    whole_prefix_only: bool
    data: bytes | None = None  # in RAM
    path: Path | None = None  # on disk
    header: StateHeader | None = None


@dataclass(frozen=True)
class Found:
    """A saved state to restore: its tokens and bytes, and how many of them the prompt keeps."""

    tokens: tuple[int, ...]
    data: bytes
    keep: int
    source: str  # "ram" or "disk"


class StateStore:
    """The saved states of one loaded model (its StateKey); files of other keys are left to them.

    Disk writes run on a thread of their own, so an answer never waits for one. Files
    are signed with secret, the install's key (cache_files.install_secret): a file
    whose signature does not hold is removed, never restored.
    """

    def __init__(self, key: StateKey, folder: Path | None, disk_budget: int,
                 ram_budget: int = RAM_BUDGET, ram_entries: int = RAM_ENTRIES, *,
                 secret: bytes | None = None) -> None:
        self.key = key
        self.folder = folder if disk_budget > 0 else None
        if self.folder is not None and not secret:
            raise ValueError("saved states on disk need the install's key to sign them")
        self._secret = secret or b""
        self.disk_budget = disk_budget
        self._ram_budget, self._ram_entries = ram_budget, ram_entries
        self._ram: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()
        self._disk: dict[tuple[int, ...], _Entry] = {}
        self._lock = threading.Lock()
        self._writes: queue.Queue[tuple[_Entry, bytes] | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        if self.folder is not None:
            self._scan()

    # --- finding and saving ---------------------------------------------------------

    def find(self, prompt: Sequence[int], held: int) -> Found | None:
        """The saved state that spares the most evaluation of prompt, beyond the `held`
        tokens the context already has; None when none saves MIN_GAIN tokens."""
        with self._lock:
            candidates = list(self._ram.values()) + [e for t, e in self._disk.items() if t not in self._ram]
        best: tuple[int, _Entry] | None = None
        for entry in candidates:
            # The last prompt token is always evaluated, for the logits of the first answer token.
            keep = min(common_prefix(entry.tokens, prompt), len(prompt) - 1)
            if entry.whole_prefix_only and keep < len(entry.tokens):
                continue  # only the sliding window's cells were saved: it cannot go back
            if keep >= held + MIN_GAIN and (best is None or keep > best[0]):
                best = (keep, entry)
        if best is None:
            return None
        keep, entry = best
        data = entry.data if entry.data is not None else self._read(entry)
        if data is None:
            return None
        with self._lock:
            if entry.tokens in self._ram:
                self._ram.move_to_end(entry.tokens)
        if entry.path is not None:
            _touch(entry.path)
        return Found(entry.tokens, data, keep, "ram" if entry.data is not None else "disk")

    def save(self, tokens: Sequence[int], data: bytes, whole_prefix_only: bool) -> None:
        """Keep a state in RAM now and queue it for the disk. States whose tokens are a
        prefix of these (the same chat, an answer ago) are dropped: this one covers them."""
        entry = _Entry(tuple(tokens), whole_prefix_only, data=data)
        with self._lock:
            for old in [t for t in list(self._ram) + list(self._disk) if _is_prefix(t, entry.tokens)]:
                self._ram.pop(old, None)
                stale = self._disk.pop(old, None)
                if stale is not None and stale.path is not None:
                    cache_files.remove(stale.path)
            self._ram[entry.tokens] = entry
            self._trim_ram()
        if self.folder is not None:
            self._start_writer()
            self._writes.put((entry, data))

    def forget(self) -> None:
        """Drop every saved state of every model: RAM now, and the files once the writer is idle."""
        self.flush()
        with self._lock:
            self._ram.clear()
            self._disk.clear()
        if self.folder is not None:
            clear_folder(self.folder)

    def flush(self) -> None:
        """Wait until every queued write is on disk."""
        if self._writer is not None:
            self._writes.join()

    def close(self) -> None:
        """Finish the writes already queued, then stop the writer; RAM states are dropped."""
        if self._writer is not None:
            self._writes.put(None)
            self._writer.join()
            self._writer = None
        with self._lock:
            self._ram.clear()

    def ram_bytes(self) -> int:
        with self._lock:
            return sum(len(e.data or b"") for e in self._ram.values())

    # --- disk ------------------------------------------------------------------------

    def _scan(self) -> None:
        """Index this key's files; remove any entry that is not a usable state of a key
        (another version, truncated, a foreign header under this key's name, a header
        too big or too deep, a link, a FIFO or a device). Nothing here can block."""
        assert self.folder is not None
        self.folder.mkdir(parents=True, exist_ok=True)
        now = time.time()
        for path in _entries(self.folder):
            if path.name.endswith(".tmp"):
                if now - _mtime(path) > STALE_TEMPORARY_S:
                    cache_files.remove(path)
                continue
            if path.suffix != kv_state.SUFFIX:
                continue
            header = kv_state.read_header(path)
            if header is None or (path.name.startswith(self.key.name) and header.key != self.key):
                cache_files.remove(path)
            elif header.key == self.key:
                self._disk[header.tokens] = _Entry(header.tokens, header.whole_prefix_only, path=path,
                                                   header=header)

    def _read(self, entry: _Entry) -> bytes | None:
        assert entry.path is not None
        header = entry.header or kv_state.read_header(entry.path)
        data = (kv_state.read_body(entry.path, header, self._secret)
                if header is not None and header.key == self.key else None)
        if data is None:  # damaged, replaced or not signed by this install: never trusted again
            cache_files.remove(entry.path)
            with self._lock:
                self._disk.pop(entry.tokens, None)
        return data

    def _start_writer(self) -> None:
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_loop, name="kv-state-writer", daemon=True)
            self._writer.start()

    def _write_loop(self) -> None:
        while True:
            item = self._writes.get()
            try:
                if item is None:
                    return
                self._write(*item)
            except OSError:
                pass  # a full or read-only disk: the state stays in RAM only
            finally:
                self._writes.task_done()

    def _write(self, entry: _Entry, data: bytes) -> None:
        assert self.folder is not None
        if len(data) > self.disk_budget:
            return
        with self._lock:
            others = [*self._ram.values(), *self._disk.values()]
            # The same chat has moved on since: a newer state covers this one, unless it
            # can only continue from its own end (a sliding window's), when this one is
            # what a regenerate of the last answer starts from.
            if any(_is_prefix(entry.tokens, k.tokens) and not k.whole_prefix_only for k in others):
                return
        name = f"{self.key.name}-{kv_state._digest(repr(entry.tokens).encode())[:16]}{kv_state.SUFFIX}"
        path = self.folder / name
        kv_state.write_file(path, self.key, entry.tokens, data, entry.whole_prefix_only, secret=self._secret)
        header = kv_state.read_header(path)
        with self._lock:
            self._disk[entry.tokens] = _Entry(entry.tokens, entry.whole_prefix_only, path=path, header=header)
        evict_to_budget(self.folder, self.disk_budget, keep=path)
        with self._lock:
            for tokens, known in list(self._disk.items()):
                if known.path is not None and not known.path.exists():
                    del self._disk[tokens]

    def _trim_ram(self) -> None:
        total = sum(len(e.data or b"") for e in self._ram.values())
        while self._ram and (len(self._ram) > self._ram_entries or total > self._ram_budget):
            _, old = self._ram.popitem(last=False)
            total -= len(old.data or b"")


def folder_usage(folder: Path) -> tuple[int, int]:
    """(files, bytes) of the saved states in folder."""
    files = [p for p in _state_files(folder)]
    return len(files), sum(_size(p) for p in files)


def clear_folder(folder: Path) -> None:
    """Remove every saved state file (and leftover temporary files) in folder."""
    for path in _entries(folder):
        if path.suffix == kv_state.SUFFIX or path.name.endswith(".tmp"):
            cache_files.remove(path)


def evict_to_budget(folder: Path, budget: int, keep: Path | None = None) -> None:
    """Remove the least recently used state files until the folder fits budget."""
    files = sorted(_state_files(folder), key=_mtime)
    total = sum(_size(p) for p in files)
    for path in files:
        if total <= budget:
            break
        if path != keep:
            total -= _size(path)
            cache_files.remove(path)


def _state_files(folder: Path) -> list[Path]:
    """The regular files named as states in folder (a link or a FIFO is not one)."""
    return [p for p in _entries(folder) if p.suffix == kv_state.SUFFIX and cache_files.is_regular(p)]


def _entries(folder: Path) -> list[Path]:
    """Up to MAX_SCANNED entries of folder; none when it is not a folder or cannot be read."""
    try:
        with os.scandir(folder) as listing:
            return [Path(entry.path) for _, entry in zip(range(MAX_SCANNED), listing)]
    except OSError:
        return []


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens a and b share from the start."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _is_prefix(shorter: tuple[int, ...], longer: tuple[int, ...]) -> bool:
    return len(shorter) < len(longer) and longer[:len(shorter)] == shorter


def _touch(path: Path) -> None:
    """Mark a state used (least recently used goes first), on the file itself, never a link's target."""
    try:
        if os.utime in os.supports_follow_symlinks:
            os.utime(path, follow_symlinks=False)
        elif cache_files.is_regular(path):
            os.utime(path)
    except OSError:
        pass


def _mtime(path: Path) -> float:
    found = cache_files.lstat_or_none(path)
    return found.st_mtime if found is not None else 0.0


def _size(path: Path) -> int:
    found = cache_files.lstat_or_none(path)
    return found.st_size if found is not None and stat.S_ISREG(found.st_mode) else 0
