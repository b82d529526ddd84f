"""The values the documents index hands the layers above: collections, their files, progress, hits."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class DocumentsError(Exception):
    """Something the user can fix: a folder that is not there, a name already taken, a full disk.

    The message is meant for the user: it names what they gave and says what to do."""


class IndexUnavailable(DocumentsError):
    """The index file itself cannot be used: a full disk, no permission, another writer, damage."""


class FileState(StrEnum):
    """Where a file of a collection stands. Written to disk: never reuse a value."""

    PENDING = "pending"        # found by a scan, not yet read (a killed run leaves these)
    INDEXED = "indexed"        # its chunks are in the index
    UNREADABLE = "unreadable"  # refused by the reader; `reason` says why


@dataclass(frozen=True)
class Collection:
    """A folder the user added, and what its index holds. `indexed_at` is the end of the last
    complete run (seconds since the epoch), None until one completes."""

    name: str
    folder: Path
    files: int
    chunks: int
    unreadable: int
    pending: int
    indexed_at: float | None


@dataclass(frozen=True)
class FileRecord:
    """One file of a collection: its place, the size and modification time seen by the last scan."""

    path: Path
    size: int
    mtime_ns: int
    state: FileState
    reason: str
    chunks: int


@dataclass(frozen=True)
class IndexProgress:
    """How far a run is: files read of those it has to read, and an estimate of the time left
    (None until a few files give a pace)."""

    collection: str
    files_done: int
    files_total: int
    chunks: int
    unreadable: int
    elapsed_s: float
    seconds_left: float | None


@dataclass(frozen=True)
class IndexOutcome:
    """What one run did. `cancelled`: stopped by its control; the files it did not reach stay
    pending and the next run goes on with them."""

    collection: str
    added: int
    changed: int
    removed: int
    indexed: int
    unreadable: int
    chunks: int
    cancelled: bool


@dataclass(frozen=True)
class Hit:
    """One chunk that answers a search. `score`: higher is better; BM25's (negated) with keyword
    search alone, the reciprocal-rank-fusion sum when vectors join in, the cosine for vectors alone."""

    collection: str
    path: Path
    page: int | None
    heading: str | None
    score: float
    text: str
    chunk_id: int
