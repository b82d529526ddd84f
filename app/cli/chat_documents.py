"""`kestrel chat --attach` and `--docs`: files read and collections found before the model loads, sources after the answer."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from app.cli.terminal_text import shown_path, terminal_line, terminal_text
from app.core.attachments import AttachedFile
from app.documents.collections import DocumentsError, IndexUnavailable
from app.service.documents.attached_files import AttachmentsUnreadable, read_attachments
from app.service.documents.document_context import Fit, Material, SearchCollections

if TYPE_CHECKING:  # the index brings numpy: imported only when --docs is given
    from app.cli.docs_vectors import Vectors
    from app.documents.collections import Hit
    from app.documents.index import DocumentIndex
    from app.documents.search import VectorQuery

EXIT_USAGE = 2  # --docs: no collection of that name
EXIT_UNREADABLE = 3  # --attach: a file cannot be read (the message names it and says why)
EXIT_FILES = 7  # --docs: the documents index cannot be used (a full disk, no permission, damage)


class DocumentsRefused(Exception):
    """An attached file or a collection that will not do; carries the exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ChatDocuments:
    """What --attach and --docs gave: the files read, the collections found in their index."""

    attachments: tuple[AttachedFile, ...] = ()
    collections: tuple[str, ...] = ()
    index: DocumentIndex | None = None


def chat_documents(attach: Sequence[str], docs: Sequence[str]) -> ChatDocuments:
    """Read the attached files and find the collections; DocumentsRefused says what will not do."""
    try:
        attachments = read_attached(attach) if attach else ()
    except AttachmentsUnreadable as exc:
        raise DocumentsRefused(terminal_text(str(exc)), EXIT_UNREADABLE) from None
    if not docs:
        return ChatDocuments(attachments)
    try:
        index, collections = open_collections(docs)
    except IndexUnavailable as exc:
        raise DocumentsRefused(terminal_text(str(exc)), EXIT_FILES) from None
    except DocumentsError as exc:
        raise DocumentsRefused(terminal_text(str(exc)), EXIT_USAGE) from None
    return ChatDocuments(attachments, collections, index)


def read_attached(given: Sequence[str]) -> tuple[AttachedFile, ...]:
    """The files after --attach, read in the reader's worker process (a file that crashes or
    hangs a parser is refused, never this process); AttachmentsUnreadable names each refused one.
    A note on a file read with an adjustment (an encoding guessed) goes to standard error."""
    from app.documents.reader_worker import read_in_worker

    attachments = read_attachments([Path(path).expanduser().absolute() for path in given], read_in_worker)
    for attachment in attachments:
        if attachment.note:
            print(f"kestrel: {shown_path(Path(attachment.path))}: {attachment.note}", file=sys.stderr)
    return attachments


def open_collections(names: Sequence[str]) -> tuple[DocumentIndex, tuple[str, ...]]:
    """The documents index and the collections named after --docs, as the index spells them;
    DocumentsError names one that is not there (IndexUnavailable: the index cannot be used)."""
    from app.documents.chunks import chunk_document
    from app.documents.index import DocumentIndex, default_database
    from app.documents.reader_worker import read_in_worker

    path = default_database()
    if not path.exists():  # not created just to say it is empty
        raise DocumentsError(f"There is no collection named {names[0]!r}: no folder has been added yet. "
                             "Add one with: kestrel docs add FOLDER")
    index = DocumentIndex(path, read_in_worker, chunk_document)
    try:
        found = tuple(dict.fromkeys(index.collection(name).name for name in names))
    except BaseException:
        index.close()
        raise
    return index, found


def fit_note(material: Material | None, attachments: Sequence[AttachedFile]) -> str | None:
    """What standard error says when the attached files were too long to go in whole."""
    if material is None or material.fit is not Fit.RETRIEVED:
        return None
    names = ", ".join(terminal_line(a.name) for a in attachments)
    passages = sum(1 for source in material.sources if any(source.path == a.path for a in attachments))
    return (f"{names} {'is' if len(attachments) == 1 else 'are'} too long for the model's context with room for "
            f"the answer, so the answer had the {passages} passage{'s' if passages != 1 else ''} that best match "
            "the question (a larger --ctx, where the model holds one, lets more in).")


def sources_line(material: Material) -> dict[str, Any]:
    """The `--json` line: {"type": "sources", "fit", "sources": [{"n", "path", "page", "heading", "text"}]};
    fit: "whole" or "retrieved" for the attached files, null with collections alone."""
    return {"type": "sources", "fit": material.fit.value if material.fit is not None else None,
            "sources": [source.to_dict() for source in material.sources]}


def write_sources(out: TextIO, material: Material) -> None:
    """"Sources:" and each numbered label (file, page or heading) after a plain answer."""
    lines = "".join(f"[{source.number}] {terminal_line(source.label)}\n" for source in material.sources)
    out.write(f"\nSources:\n{lines}")
    out.flush()


def collection_search(index: DocumentIndex, vectors: VectorQuery | None) -> SearchCollections:
    """How the chat searches the --docs collections: in `index`, on a thread, by keyword and, given
    `vectors` (the embedding model's), by meaning; an embedding model that fails leaves keyword
    search, said on standard error."""
    def search(question: str, names: Sequence[str], limit: int) -> list[Hit]:
        from app.documents.embedding import EmbeddingError  # numpy and the child process: only with vectors

        if vectors is None:
            return index.search(question, names, limit=limit)
        try:
            return index.search(question, names, limit=limit, vectors=vectors)
        except EmbeddingError as exc:
            print(f"kestrel: {exc} The collections were searched by keyword only for this answer.", file=sys.stderr)
            return index.search(question, names, limit=limit)

    async def off_loop(question: str, names: Sequence[str], limit: int) -> list[Hit]:
        return await asyncio.to_thread(search, question, names, limit)

    return off_loop


def collection_vectors(documents: ChatDocuments) -> Vectors | None:
    """The embedding model's vectors for the chosen collections, when they have any, so they are
    searched by meaning too; says on standard error which search runs (as `docs search` does).
    The caller closes what it gets."""
    from app.cli.docs_vectors import Vectors, current_choice, search_note

    if documents.index is None or not documents.collections:
        return None
    choice = current_choice()
    if choice.model is None:
        return None  # keyword search, as without any embedding model: nothing to say per chat
    vectors = Vectors(choice.model)
    note = search_note(documents.index, choice, vectors, documents.collections)
    print(f"kestrel: {note}", file=sys.stderr)
    if note.startswith("Keyword"):
        vectors.close()
        return None
    return vectors
