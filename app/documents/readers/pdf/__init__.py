"""PDF: the text layer page by page, headings from the bookmarks (pages.py, loaded only where a PDF is read)."""

from __future__ import annotations

from app.documents.readers import OpenedFile, ReadText, document_format


@document_format(kind="pdf", name="PDF", noun="PDF", order=10, extensions=(".pdf",), mime_types=("application/pdf",))
def read_pdf(opened: OpenedFile) -> ReadText:
    from app.documents.readers.pdf.pages import pdf_sections  # PDFium loads only in the reader's process

    sections, note = pdf_sections(opened.file)
    return ReadText(sections, note)
