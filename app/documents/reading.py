"""Reading one document into sections in this process: the size and type checks, then its format's reader."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import BinaryIO

from app.documents.opening import open_document
from app.documents.readers import DocumentFormat, OpenedFile, format_of, formats_in_words
from app.documents.refusal import Refused
from app.documents.values import DocumentText, ReadLimits, Unreadable, UnreadableCause as Cause, printable


def read_document(path: Path, *, limits: ReadLimits = ReadLimits(),
                  within: Path | None = None) -> DocumentText | Unreadable:
    """Read `path` here, in this process. A parser can crash or hang on a hostile file, so the
    window and the index call this through reader_worker's pool, never directly. `within`: the
    collection's folder, which the file must not lead out of (opening.open_document)."""
    document = format_of(path)
    if document is None:
        return Unreadable(path, f"Kestrel does not read {printable(path.suffix) or 'these'} files: it reads "
                                f"{formats_in_words()}", Cause.NOT_A_DOCUMENT)
    try:
        with open_document(path, within) as file:
            opened = OpenedFile(path, file, _checked_size(file, document, limits), limits)
            read = document.read(opened)  # each reader reads the file opened, never the path again
    except Refused as refused:
        return Unreadable(path, printable(refused.reason), refused.cause)
    except OSError as error:
        return _os_unreadable(path, error)
    except MemoryError:
        return Unreadable(path, f"reading it needed more than the {limits.memory_bytes // 2**20:,} MB of memory "
                                "Kestrel gives its reader", Cause.OUT_OF_MEMORY)
    except Exception as error:  # noqa: BLE001 - the parsers raise anything on a damaged file
        # pypdfium2, python-docx, lxml and zipfile each raise their own exceptions on a broken
        # file; all of them mean "this file", never "stop reading the folder".
        return Unreadable(path, printable(f"damaged or unusual {document.noun}: the reader failed on it "
                                          f"({type(error).__name__}: {str(error)[:200]})"), Cause.DAMAGED)
    if not read.sections:
        return Unreadable(path, "there is no text in it", Cause.NO_TEXT)
    return DocumentText(path, document.kind, read.sections, read.note)


def _checked_size(file: BinaryIO, document: DocumentFormat, limits: ReadLimits) -> int:
    """The open file's size, after refusing a file too big to read or empty."""
    size = os.fstat(file.fileno()).st_size
    limit = document.size_limit(limits)
    if size > limit:
        raise Refused(Cause.TOO_LARGE, f"too large: {_megabytes(size)}, and Kestrel reads "
                                       f"{document.noun}s up to {_megabytes(limit)}")
    if size == 0:
        raise Refused(Cause.NO_TEXT, "the file is empty")
    return size


def _os_unreadable(path: Path, error: OSError) -> Unreadable:
    if error.errno == errno.ELOOP:
        return Unreadable(path, "a symbolic link that leads back to itself (a link loop)", Cause.NO_ACCESS)
    if error.errno == errno.ENOENT:
        return Unreadable(path, "the file is gone (deleted or moved, or a link to a missing file)", Cause.NO_ACCESS)
    if error.errno in (errno.EACCES, errno.EPERM):
        return Unreadable(path, "Kestrel is not allowed to read it: check the file's permissions", Cause.NO_ACCESS)
    return Unreadable(path, f"the file cannot be read: {error.strerror or error}", Cause.NO_ACCESS)


def _megabytes(size: int) -> str:
    return f"{size / 2**20:,.0f} MB" if size >= 2**20 else f"{size / 1024:,.0f} KB"
