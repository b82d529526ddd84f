"""Word documents (.docx) through python-docx: paragraphs and tables in order, headings from their styles."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import docx
from docx.opc.exceptions import PackageNotFoundError
from docx.styles.style import CharacterStyle
from docx.table import Table
from docx.text.paragraph import Paragraph

from app.documents.refusal import Refused
from app.documents.text_files import HeadingPath
from app.documents.values import Section, UnreadableCause as Cause

# Word's older format and its password-protected .docx files are OLE compound files, not zips.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_MAX_MEMBERS = 10_000
_HEADING_STYLE = re.compile(r"heading\s*(\d)$", re.IGNORECASE)


def check_unpacked_size(path: Path, limit: int) -> None:
    """Refuse a DOCX whose zip directory declares more than `limit` bytes unpacked (a zip bomb)
    before any member is inflated. zipfile then stops every member at its declared size, so a
    directory that lies cannot make the reader inflate more than it declared."""
    with path.open("rb") as file:
        if file.read(len(_OLE_MAGIC)) == _OLE_MAGIC:
            raise Refused(Cause.ENCRYPTED, "password-protected Word document (or an old .doc file "
                                           "renamed): save a copy without the password as .docx")
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError):
        raise Refused(Cause.DAMAGED, "damaged Word document: it is not a valid .docx (zip) file") from None
    declared = sum(member.file_size for member in members)
    if declared > limit or len(members) > _MAX_MEMBERS:
        raise Refused(Cause.TOO_LARGE, f"this .docx would unpack to {declared // 2**20:,} MB in "
                                       f"{len(members):,} parts, more than the {limit // 2**20:,} MB "
                                       "Kestrel unpacks (a compressed \"zip bomb\"?)")


def docx_sections(path: Path, max_unpacked_bytes: int) -> tuple[Section, ...]:
    """The body's paragraphs and tables, split at heading paragraphs. Headers, footers, footnotes,
    comments and text boxes are left out; a .docx has no pages until Word lays it out."""
    check_unpacked_size(path, max_unpacked_bytes)
    try:
        document = docx.Document(str(path))
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
