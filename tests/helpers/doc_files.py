"""Real documents for the reader's tests, written by the libraries that write them (fpdf2,
python-docx), hostile ones built byte by byte, and stand-in readers that hang, crash or eat memory."""

from __future__ import annotations

import os
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

import docx
from fpdf import FPDF

from app.documents.reading import read_document
from app.documents.values import DocumentText, ReadLimits, Unreadable


def write_pdf(path: Path, pages: Sequence[Sequence[tuple[str | None, str]]], *,
              owner_password: str | None = None, user_password: str = "") -> Path:
    """A PDF with one list per page of (heading, body) pairs; each heading is written in bold and
    becomes a bookmark at its place (level 0), so the reader can find it in the text."""
    pdf = FPDF()
    pdf.set_auto_page_break(False)
    for blocks in pages:
        pdf.add_page()
        for heading, body in blocks:
            if heading is not None:
                pdf.start_section(heading, level=0)
                pdf.set_font("Helvetica", style="B", size=16)
                pdf.multi_cell(0, 10, heading, new_x="LMARGIN", new_y="NEXT")
            pdf.set_font("Helvetica", size=11)
            pdf.multi_cell(0, 6, body, new_x="LMARGIN", new_y="NEXT")
    if owner_password is not None:
        pdf.set_encryption(owner_password=owner_password, user_password=user_password)
    pdf.output(str(path))
    return path


def write_image_only_pdf(path: Path) -> Path:
    """A "scanned" PDF: two pages with drawings and no text layer."""
    pdf = FPDF()
    for _ in range(2):
        pdf.add_page()
        pdf.set_fill_color(120, 120, 120)
        pdf.rect(20, 20, 170, 250, style="F")
    pdf.output(str(path))
    return path


def write_looping_pdf(path: Path) -> Path:
    """A PDF whose page tree is a loop (two /Pages nodes that are each other's kid), with a correct
    cross-reference table, so only the loop is wrong."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R] /Count 1 >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def write_docx(path: Path) -> Path:
    """A Word document with a title, nested headings, body text and a table."""
    document = docx.Document()
    document.add_heading("Field Guide", level=0)
    document.add_paragraph("Kestrels hover over open ground.")
    document.add_heading("Habitat", level=1)
    document.add_paragraph("Farmland, moors and road verges.")
    document.add_heading("Nesting", level=2)
    document.add_paragraph("Old crow nests and ledges.")
    table = document.add_table(rows=2, cols=2)
    for row, cells in zip(table.rows, (("Month", "Eggs"), ("May", "4-6"))):
        for cell, text in zip(row.cells, cells):
            cell.text = text
    document.add_heading("Diet", level=1)
    document.add_paragraph("Voles, mostly.")
    document.save(str(path))
    return path


def write_zip_bomb_docx(path: Path, unpacked_bytes: int) -> Path:
    """A real .docx with one more member of `unpacked_bytes` zeros, which deflate packs about a
    thousand to one: small on disk, huge once unpacked."""
    write_docx(path)
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("word/media/padding.bin", "w", force_zip64=True) as member:
            for _ in range(unpacked_bytes // len(chunk)):
                member.write(chunk)
    return path


def write_sparse(path: Path, size: int) -> Path:
    """A file of `size` bytes that takes no room on disk (a hole)."""
    with path.open("wb") as file:
        file.truncate(size)
    return path


# Stand-in readers for the pool's child (module-level, so the spawned child can import them).

def hang_or_read(path: Path, *, limits: ReadLimits) -> DocumentText | Unreadable:
    """Hangs for ever on a file named hang*, reads anything else."""
    if path.name.startswith("hang"):
        while True:
            time.sleep(1)
    return read_document(path, limits=limits)


def crash_or_read(path: Path, *, limits: ReadLimits) -> DocumentText | Unreadable:
    """Dies the way a native parser does (SIGABRT) on a file named crash*, reads anything else."""
    if path.name.startswith("crash"):
        os.abort()
    return read_document(path, limits=limits)


def hog_or_read(path: Path, *, limits: ReadLimits) -> DocumentText | Unreadable:
    """Asks for twice the reader's memory cap on a file named hog*, reads anything else."""
    if path.name.startswith("hog"):
        hoard = bytearray(limits.memory_bytes * 2)
        hoard[-1] = 1
    return read_document(path, limits=limits)
