"""The values app.documents hands the layers above: what a file said, why it could not be read, its chunks."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

# A file name that is not valid UTF-8 (POSIX) or UTF-16 (Windows) reaches Python as lone
# surrogates, which no text encoder, SQLite or terminal takes.
_SURROGATES = re.compile("[\ud800-\udfff]")


class UnreadableCause(StrEnum):
    """Why a file was refused, as a code the index can count and a front end can word or filter;
    `Unreadable.reason` carries the plain sentence. Values are written to disk: never reuse one."""

    TOO_LARGE = "too_large"
    NOT_A_DOCUMENT = "not_a_document"   # binary, unknown extension, a folder or a device
    NO_TEXT = "no_text"                 # a scanned PDF, an empty document
    ENCRYPTED = "encrypted"
    DAMAGED = "damaged"                 # the parser refused or crashed on it
    TIMED_OUT = "timed_out"             # the parser ran past the per-file time limit
    OUT_OF_MEMORY = "out_of_memory"     # the parser ran past the worker's memory cap
    NO_ACCESS = "no_access"             # permissions, a symlink loop, gone while read
    OUTSIDE_FOLDER = "outside_folder"   # a link out of the collection's folder: never followed


@dataclass(frozen=True)
class Section:
    """A stretch of a document under one heading and on one page. `heading` is the path of
    headings above it joined by " › " ("Intro › Setup"); `page` counts from 1 (PDF only)."""

    text: str
    page: int | None
    heading: str | None


@dataclass(frozen=True)
class DocumentText:
    """All a readable file said, in reading order. `kind` names the format that read it (its
    DocumentFormat's kind: "pdf", "markdown"…, kept in the history). `note` tells the user
    something was adjusted on the way (an encoding guessed, characters replaced): nothing
    changes silently."""

    path: Path
    kind: str
    sections: tuple[Section, ...]
    note: str = ""


@dataclass(frozen=True)
class Unreadable:
    """A file that cannot be read, and why in plain words the user can act on."""

    path: Path
    reason: str
    cause: UnreadableCause = UnreadableCause.DAMAGED


@dataclass(frozen=True)
class Chunk:
    """A piece of a document small enough to embed and to quote as a source. `ordinal` is its
    place in the document from 0; `tokens` is an estimate (about 4 characters a token)."""

    text: str
    page: int | None
    heading: str | None
    ordinal: int
    tokens: int


@dataclass(frozen=True)
class ReadLimits:
    """What one file may cost to read. The defaults let a 1,000-page report through and stop a
    file that would take the reader down: bigger files are refused before a byte is read."""

    max_file_bytes: int = 200 * 1024 * 1024
    max_text_bytes: int = 20 * 1024 * 1024      # a text/code/HTML file is read whole into memory
    max_unpacked_bytes: int = 300 * 1024 * 1024  # a DOCX's members as its zip directory declares them
    # A DOCX's XML parts, unpacked: python-docx's tree takes about seven times this in memory,
    # so that a document under it fits the reader's memory cap.
    max_xml_bytes: int = 100 * 1024 * 1024
    seconds_per_file: float = 60.0
    memory_bytes: int = 2 * 1024 * 1024 * 1024   # the worker's address-space cap (Linux and macOS)


class FolderFiles(tuple[Path, ...]):
    """Paths in one collection's folder, for the reader: each is read only where it resolves
    inside `folder`, so a link (or a folder swapped for one) cannot lead the reader out of it.
    A reader that does not know this type reads them as plain paths."""

    folder: Path

    def __new__(cls, folder: Path, paths: Iterable[Path]) -> FolderFiles:
        files = super().__new__(cls, paths)
        files.folder = folder
        return files

    def __reduce__(self) -> tuple[type[FolderFiles], tuple[Path, tuple[Path, ...]]]:
        return FolderFiles, (self.folder, tuple(self))


def printable(text: str) -> str:
    """`text` with each byte of a file name that was not valid UTF-8 (a lone surrogate) shown as
    �: the path as the user can be shown it, and as SQLite, JSON and a model take it."""
    return _SURROGATES.sub("\ufffd", text)


def source_label(path: Path | str, page: int | None, heading: str | None) -> str:
    """How a source is named to the user: "report.pdf, p. 12", "notes.md › Setup",
    "report.pdf, p. 12 › Results"; the file's name alone when neither is known."""
    label = printable(Path(path).name)
    if page is not None:
        label += f", p. {page}"
    if heading:
        label += f" › {heading}"
    return label
