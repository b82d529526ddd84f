"""Plain text: log files, tables as text, subtitles, the README without an extension; one section, no headings."""

from __future__ import annotations

from app.documents.readers import OpenedFile, ReadText, document_format
from app.documents.readers.text_files import decoded_text, plain_sections


@document_format(kind="text", name="text", noun="text file", order=40, whole_in_memory=True,
                 extensions=(".txt", ".text", ".log", ".csv", ".tsv", ".rst", ".org", ".adoc", ".tex", ".srt",
                             ".vtt"),
                 # Files without an extension that are text by convention.
                 file_names=("README", "LICENSE", "COPYING", "NOTICE", "AUTHORS", "CHANGELOG"),
                 mime_types=("text/plain", "text/csv", "text/tab-separated-values", "text/x-rst", "text/org",
                             "text/asciidoc", "text/x-tex", "application/x-subrip", "text/vtt"))
def read_text(opened: OpenedFile) -> ReadText:
    decoded = decoded_text(opened)
    return ReadText(plain_sections(decoded.text), decoded.note)
