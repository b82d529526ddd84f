"""A reader and chunker in this process for the index's tests, so that they test the index alone
(the real ones, in a worker process, have their own tests)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from app.documents.values import Chunk, DocumentText, Section, Unreadable, UnreadableCause


def read_here(paths: Sequence[Path]) -> Iterator[DocumentText | Unreadable]:
    """Each file as one section of UTF-8 text; a file that is not UTF-8 is refused as the reader would."""
    for path in paths:
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            yield Unreadable(path, f"{path.name} is not text.", UnreadableCause.NOT_A_DOCUMENT)
        except OSError as exc:
            yield Unreadable(path, f"{path.name} could not be read: {exc.strerror}.", UnreadableCause.NO_ACCESS)
        else:
            yield DocumentText(path, "text", (Section(text, None, None),))


def paragraphs(document: DocumentText) -> list[Chunk]:
    """One chunk per paragraph, with the file's name as its heading."""
    texts = [part.strip() for section in document.sections for part in section.text.split("\n\n") if part.strip()]
    return [Chunk(text, None, document.path.stem, ordinal, len(text) // 4 + 1) for ordinal, text in enumerate(texts)]


class WordHashEmbedder:
    """A deterministic bag-of-words embedder: texts that share words get close vectors."""

    def __init__(self, width: int = 64) -> None:
        self.width = width
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        vectors = []
        for text in texts:
            vector = [0.0] * self.width
            for word in re.findall(r"\w+", text.casefold()):
                vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.width] += 1.0
            vectors.append(vector)
        return vectors
