"""A document reader that lives only in the tests: ROT13 text (.rot13), declared and registered as Kestrel's own are.

Nothing else names it: once this module is imported, the folder scan lists its files, the reader's
child process reads them, an attached one is read, and the words, the CLI's help and the file
dialog's filter name it (tests/documents/test_reader_registry.py shows each)."""

from __future__ import annotations

import codecs

from app.documents.readers import OpenedFile, ReadText, document_format
from app.documents.readers.text_files import decoded_text, plain_sections


@document_format(kind="test-rot13", name="ROT13 text", noun="ROT13 file", extensions=(".rot13",),
                 mime_types=("text/x-rot13",), whole_in_memory=True, order=900)
def read_rot13(opened: OpenedFile) -> ReadText:
    decoded = decoded_text(opened)
    return ReadText(plain_sections(codecs.decode(decoded.text, "rot13")), decoded.note)
