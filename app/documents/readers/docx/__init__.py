"""Word documents (.docx): the body's paragraphs and tables, headings from their styles (body.py, under package.py's limits)."""

from __future__ import annotations

from app.documents.readers import OpenedFile, ReadText, document_format


@document_format(kind="docx", name="Word .docx", noun="Word document", order=20, extensions=(".docx",),
                 mime_types=("application/vnd.openxmlformats-officedocument.wordprocessingml.document",))
def read_docx(opened: OpenedFile) -> ReadText:
    from app.documents.readers.docx.body import docx_sections  # python-docx and lxml load only in the reader's process

    return ReadText(docx_sections(opened.file, opened.limits))
