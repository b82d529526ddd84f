"""Reading one document into sections in this process: the size and type checks, then the format's reader."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import BinaryIO

from app.documents.kinds import file_kind
from app.documents.opening import open_document
from app.documents.refusal import Refused
from app.documents.values import (DocumentText, FileKind, ReadLimits, Section, Unreadable,
                                  UnreadableCause as Cause, printable)

_TEXT_KINDS = frozenset({FileKind.TEXT, FileKind.MARKDOWN, FileKind.CODE, FileKind.HTML})
_KIND_WORDS = {FileKind.PDF: "PDF", FileKind.DOCX: "Word document", FileKind.HTML: "web page",
               FileKind.MARKDOWN: "Markdown file", FileKind.CODE: "source file", FileKind.TEXT: "text file"}


def read_document(path: Path, *, limits: ReadLimits = ReadLimits(),
                  within: Path | None = None) -> DocumentText | Unreadable:
    """Read `path` here, in this process. A parser can crash or hang on a hostile file, so the
    window and the index call this through reader_worker's pool, never directly. `within`: the
    collection's folder, which the file must not lead out of (opening.open_document)."""
    kind = file_kind(path)
    if kind is None:
        return Unreadable(path, f"Kestrel does not read {printable(path.suffix) or 'these'} files: it reads text, "
                                "Markdown, source code, web pages (HTML), PDF and Word (.docx)", Cause.NOT_A_DOCUMENT)
    try:
        with open_document(path, within) as file:
            size = _checked_size(file, kind, limits)
            return _read(path, file, kind, size, limits)
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
        return Unreadable(path, printable(f"damaged or unusual {_KIND_WORDS[kind]}: the reader failed on it "
                                          f"({type(error).__name__}: {str(error)[:200]})"), Cause.DAMAGED)


def _checked_size(file: BinaryIO, kind: FileKind, limits: ReadLimits) -> int:
    """The open file's size, after refusing a file too big to read or empty."""
    size = os.fstat(file.fileno()).st_size
    limit = limits.max_text_bytes if kind in _TEXT_KINDS else limits.max_file_bytes
    if size > limit:
        raise Refused(Cause.TOO_LARGE, f"too large: {_megabytes(size)}, and Kestrel reads "
                                       f"{_KIND_WORDS[kind]}s up to {_megabytes(limit)}")
    if size == 0:
        raise Refused(Cause.NO_TEXT, "the file is empty")
    return size


def _read(path: Path, file: BinaryIO, kind: FileKind, size: int, limits: ReadLimits) -> DocumentText | Unreadable:
    """The open file's text, by its kind; each reader reads the file opened, never the path again."""
    note = ""
    sections: tuple[Section, ...]
    if kind is FileKind.PDF:
        from app.documents.pdf_text import pdf_sections  # the parsers load only in the reader's process
        sections, note = pdf_sections(file)
    elif kind is FileKind.DOCX:
        from app.documents.docx_text import docx_sections
        sections = docx_sections(file, limits)
    else:
        sections, note = _read_text(path, file, kind, size)
    if not sections:
        return Unreadable(path, "there is no text in it", Cause.NO_TEXT)
    return DocumentText(path, kind, sections, note)


def _read_text(path: Path, file: BinaryIO, kind: FileKind, size: int) -> tuple[tuple[Section, ...], str]:
    from app.documents.html_text import declared_charset, html_sections
    from app.documents.text_files import NotText, decode_text, markdown_sections, plain_sections

    data = file.read(size + 1)[:size]  # a file that grew since its size was taken is read as far as it was then
    try:
        decoded = decode_text(data, declared_charset(data) if kind is FileKind.HTML else None)
    except NotText:
        raise Refused(Cause.NOT_A_DOCUMENT, f"not text: it looks like a binary file with a "
                                            f"{path.suffix or 'text'} name") from None
    if kind is FileKind.MARKDOWN:
        return markdown_sections(decoded.text), decoded.note
    if kind is FileKind.HTML:
        return html_sections(decoded.text), decoded.note
    return plain_sections(decoded.text), decoded.note


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
