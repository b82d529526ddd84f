"""Word documents (.docx) through python-docx: paragraphs and tables in order, headings from their styles."""

from __future__ import annotations

import importlib
import re
import zipfile
from typing import BinaryIO

import docx
from docx.opc.exceptions import PackageNotFoundError
from docx.styles.style import CharacterStyle
from docx.table import Table
from docx.text.paragraph import Paragraph

from app.documents.readers.docx.package import docx_package, megabytes
from app.documents.readers.text_files import HeadingPath
from app.documents.refusal import Refused
from app.documents.values import ReadLimits, Section, UnreadableCause as Cause

_HEADING_STYLE = re.compile(r"heading\s*(\d)$", re.IGNORECASE)
# lxml's parse error, which python-docx lets through (lxml ships no type hints).
_XML_ERROR: type[Exception] = importlib.import_module("lxml.etree").XMLSyntaxError
# What libxml2 says when an allocation fails under the reader's memory cap ("unknown error" when
# it could not even allocate the message): the file is not damaged, it is too large.
_OUT_OF_MEMORY = ("unknown error", "memory allocation failed")
# libxml2's own limits (a text node over 10 MB, nesting over 256 levels): too large, not damaged.
_PAST_PARSER_LIMITS = ("huge", "excessive depth")


def docx_sections(file: BinaryIO, limits: ReadLimits) -> tuple[Section, ...]:
    """The body's paragraphs and tables, split at heading paragraphs. Headers, footers, footnotes,
    comments and text boxes are left out; a .docx has no pages until Word lays it out."""
    package, xml_bytes = docx_package(file, limits)
    try:
        return _sections(package)
    except (MemoryError, _XML_ERROR) as error:
        said = str(error).lower()
        if isinstance(error, MemoryError) or any(words in said for words in _OUT_OF_MEMORY):
            raise Refused(Cause.TOO_LARGE, f"too large for Kestrel to read: {megabytes(xml_bytes)} of text/XML "
                                           f"needed more than the {limits.memory_bytes // 2**20:,} MB of memory the "
                                           "reader may use. Split the document into smaller ones, or save it as PDF "
                                           "or text") from None
        if any(words in said for words in _PAST_PARSER_LIMITS):
            raise Refused(Cause.TOO_LARGE, "too large for Kestrel to read: one stretch of its text/XML is longer or "
                                           f"nested deeper than the XML reader takes ({str(error)[:120]})") from None
        raise


def _sections(package: BinaryIO) -> tuple[Section, ...]:
    try:
        document = docx.Document(package)
    except (KeyError, ValueError, zipfile.BadZipFile, PackageNotFoundError):
        raise Refused(Cause.DAMAGED, "damaged Word document: its main part is missing or unreadable") from None
    sections: list[Section] = []
    path_so_far = HeadingPath()
    lines: list[str] = []

    def close() -> None:
        text = "\n".join(lines).strip()
        if text:
            sections.append(Section(text, None, path_so_far.label()))
        lines.clear()

    for block in document.iter_inner_content():
        if isinstance(block, Table):
            lines.extend(_table_lines(block))
            continue
        level = _heading_level(block)
        if level is not None:
            close()
            path_so_far.enter(level, " ".join(block.text.split()))
        lines.append(block.text)
    close()
    return tuple(sections)


def _heading_level(paragraph: Paragraph) -> int | None:
    """1-9 for a heading paragraph: its style (or the style it is based on) is "Heading N" or
    "Title", or sets an outline level; None for body text."""
    style: CharacterStyle | None = paragraph.style
    depth = 0
    while style is not None and depth < 10:
        name = style.name or ""
        match = _HEADING_STYLE.match(name)
        if match:
            return int(match.group(1))
        if name.lower() == "title":
            return 1
        outline = style.element.xpath("./w:pPr/w:outlineLvl/@w:val")
        if outline and str(outline[0]).isdigit() and int(outline[0]) < 9:
            return int(outline[0]) + 1
        style, depth = style.base_style, depth + 1
    return None


def _table_lines(table: Table) -> list[str]:
    """A row a line, cells separated by " | "; a merged cell is written once."""
    lines = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            if not cells or cells[-1] != text:
                cells.append(text)
        if any(cells):
            lines.append(" | ".join(cells))
    return lines
