"""PDF files: the text layer page by page through PDFium (pypdfium2), headings from the PDF's bookmarks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import BinaryIO

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from app.documents.readers.text_files import HeadingPath
from app.documents.refusal import Refused
from app.documents.values import Section, UnreadableCause as Cause

# PDFium's markers for a hyphen it joined at a line end, and for characters it could not map.
_JOINED_HYPHEN = re.compile("[\ufffe\x02]")


@dataclass(frozen=True)
class _Bookmark:
    page_index: int
    level: int
    title: str


def pdf_sections(file: BinaryIO) -> tuple[tuple[Section, ...], str]:
    """One section per page of the open file, split further where a bookmark's title starts on that
    page, and a note naming the pages that could not be read (left out: one bad page loses only itself)."""
    try:
        pdf = pdfium.PdfDocument(file)
    except pdfium.PdfiumError as error:
        raise _open_refusal(error) from None
    try:
        bookmarks = _bookmarks(pdf)
        sections: list[Section] = []
        path_so_far = HeadingPath()
        bad_pages: list[int] = []
        for index in range(len(pdf)):
            try:
                text = _page_text(pdf, index)
            except pdfium.PdfiumError:
                bad_pages.append(index + 1)
                continue
            on_page = [mark for mark in bookmarks if mark.page_index == index]
            sections.extend(_split_page(text, index + 1, on_page, path_so_far))
        page_count = len(pdf)
    finally:
        pdf.close()
    if len(bad_pages) == page_count:
        which = "its one page cannot" if page_count == 1 else f"none of its {page_count:,} pages can"
        raise Refused(Cause.DAMAGED, f"damaged PDF: {which} be read (try opening it in a PDF "
                                     "viewer and saving it again)")
    if not sections:
        raise Refused(Cause.NO_TEXT, "scanned PDF without text: its pages are images, and Kestrel does "
                                     "not read text from images (OCR)")
    note = ""
    if bad_pages:
        shown = ", ".join(str(page) for page in bad_pages[:10]) + (" …" if len(bad_pages) > 10 else "")
        note = f"{len(bad_pages):,} damaged page{'s' if len(bad_pages) != 1 else ''} left out (p. {shown})"
    return tuple(sections), note


def _open_refusal(error: pdfium.PdfiumError) -> Refused:
    if error.err_code == pdfium_c.FPDF_ERR_PASSWORD:
        return Refused(Cause.ENCRYPTED, "password-protected PDF: save a copy without the password "
                                        "(Print → Save as PDF) to add it")
    if error.err_code == pdfium_c.FPDF_ERR_SECURITY:
        return Refused(Cause.ENCRYPTED, "encrypted PDF with a protection scheme Kestrel cannot open")
    return Refused(Cause.DAMAGED, "damaged PDF: its pages cannot be read (is the file complete? "
                                  "try opening it in a PDF viewer and saving it again)")


def _page_text(pdf: pdfium.PdfDocument, index: int) -> str:
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        try:
            text: str = textpage.get_text_bounded()
        finally:
            textpage.close()
    finally:
        page.close()
    return _JOINED_HYPHEN.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def _bookmarks(pdf: pdfium.PdfDocument) -> list[_Bookmark]:
    """The outline, in order; bookmarks that point nowhere are left out."""
    marks = []
    for bookmark in pdf.get_toc():
        dest = bookmark.get_dest()
        page_index = dest.get_index() if dest is not None else None
        title = " ".join(bookmark.get_title().split())
        if page_index is not None and title:
            marks.append(_Bookmark(page_index, bookmark.level, title))
    return marks


def _split_page(text: str, page: int, marks: list[_Bookmark], path: HeadingPath) -> list[Section]:
    """Cut the page where each bookmark's title appears in its text; a title not found in the
    text takes effect where the previous one ended (the top of the page for the first)."""
    sections = []
    cursor = 0
    for mark in marks:
        words = [re.escape(word) for word in mark.title.split()]
        found = re.compile(r"\s+".join(words), re.IGNORECASE).search(text, cursor)
        at = found.start() if found else cursor
        before = text[cursor:at].strip()
        if before:
            sections.append(Section(before, page, path.label()))
        path.enter(mark.level + 1, mark.title)
        cursor = at
    rest = text[cursor:].strip()
    if rest:
        sections.append(Section(rest, page, path.label()))
    return sections
