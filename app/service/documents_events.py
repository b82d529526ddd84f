"""The documents service's values and events: collections, their files, indexing progress and problems."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


PAUSED_WORDS = "Paused"
ANSWERING_WORDS = "Waiting while an answer is written"
SAVING_WORDS = "Waiting: battery saver is on"
BATTERY_WORDS = "Waiting: running on battery"


def hold_words(user: bool = False, answering: bool = False, saving: bool = False, battery: bool = False) -> str:
    """Why indexing waits, the first reason that holds it: the user's Pause, an answer, power."""
    if user:
        return PAUSED_WORDS
    if answering:
        return ANSWERING_WORDS
    if saving:
        return SAVING_WORDS
    return BATTERY_WORDS if battery else ""


class IndexState(StrEnum):
    """Where a collection's indexing stands, as the Documents window shows it."""

    IDLE = "idle"            # up to date with its folder as last scanned
    WAITING = "waiting"      # work to do, held: another collection first, an answer streams, battery saver
    SCANNING = "scanning"    # listing its folder for new, changed and deleted files
    READING = "reading"      # reading files in the reader process
    EMBEDDING = "embedding"  # making the chosen embedding model's vectors for its chunks
    PAUSED = "paused"        # held by the user's Pause
    FAILED = "failed"        # the last run could not go on (its folder gone, the index unusable)


@dataclass(frozen=True)
class CollectionInfo:
    """A collection as last known: `files` found, `indexed` read into chunks, `unreadable`
    refused by the reader (the rest wait to be read), `vectors` its chunks with vectors from
    the chosen embedding model, `last_indexed` the end of its last complete run (seconds
    since the epoch; None until one completes)."""

    name: str
    folder: Path
    files: int
    indexed: int
    unreadable: int
    chunks: int
    vectors: int
    last_indexed: float | None
    state: IndexState


@dataclass(frozen=True)
class FileInfo:
    """One file of a collection: `state` is "pending", "indexed" or "unreadable"; `reason` says
    why one is unreadable (or what was adjusted reading an indexed one), in plain words."""

    path: Path
    state: str
    reason: str
    chunks: int


@dataclass(frozen=True)
class CollectionsChanged:
    """The collections, their counts or their states changed (at most a few times a second)."""

    collections: tuple[CollectionInfo, ...]


@dataclass(frozen=True)
class IndexingProgress:
    """How far the work on one collection is: `done` of `total` files read (or chunks embedded
    while EMBEDDING), `seconds_left` once a pace is known (time held does not count), and
    `waiting_because` (empty unless held): "Paused", "Waiting while an answer is written",
    "Waiting: battery saver is on"… Sent at most about 4 times a second."""

    collection: str
    state: IndexState
    done: int
    total: int
    seconds_left: float | None
    waiting_because: str


@dataclass(frozen=True)
class DocumentsProblem:
    """Something the user can act on, in plain words: a collection's folder gone, a full disk, a
    damaged index. `collection` is empty when it concerns the whole index."""

    collection: str
    text: str
