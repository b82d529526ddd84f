"""Files attached in a chat: read once into the values the history keeps, and cut into passages when needed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from app.core.attachments import MAX_ATTACHED_CHARS, MAX_ATTACHMENTS, AttachedFile, AttachedSection
from app.documents.chunks import chunk_document
from app.documents.readers import formats_in_words
from app.documents.values import Chunk, DocumentText, Section, Unreadable, UnreadableCause, printable

ReadFiles = Callable[[Sequence[Path]], Iterator[DocumentText | Unreadable]]

# An attachment's passages are smaller than a collection's (512): a question's few passages
# then fit beside a small context's answer, and each holds less that is beside the point.
CHUNK_TOKENS = 256
CHUNK_OVERLAP = 32


class AttachmentsUnreadable(Exception):
    """Attached files that could not be read or kept; the message names each and says why."""

    def __init__(self, unreadable: Sequence[Unreadable], words: str | None = None) -> None:
        self.unreadable = tuple(unreadable)
        if words is None:
            words = " ".join(f"{printable(str(item.path))} cannot be read: {item.reason}." for item in self.unreadable)
            words += " " + _advice(self.unreadable)
        super().__init__(words)


def _advice(unreadable: Sequence[Unreadable]) -> str:
    if all(item.cause is UnreadableCause.NO_ACCESS for item in unreadable):
        return "Check the name and the path, and that you may read the file."
    if all(item.cause is UnreadableCause.TOO_LARGE for item in unreadable):
        return ("Attach a part of it, or add its folder as a collection (Documents), which is searched passage "
                "by passage.")
    return f"Leave it out, or save it in a form Kestrel reads ({formats_in_words()}) and attach that."


def read_attachments(paths: Sequence[Path], read: ReadFiles) -> tuple[AttachedFile, ...]:
    """Read each file (`read`: the reader's worker process, read_in_worker) into the value a
    message keeps; raises AttachmentsUnreadable naming every file that could not be read or
    holds more text than a chat keeps (MAX_ATTACHED_CHARS), or saying the reader could not
    start. Blocks: call off the loop."""
    if len(paths) > MAX_ATTACHMENTS:
        raise AttachmentsUnreadable((), f"{len(paths):,} files were attached; a message takes at most "
                                        f"{MAX_ATTACHMENTS}. Attach fewer, or add their folder as a collection.")
    files: list[AttachedFile] = []
    # The reader would call a folder a file of a kind it does not read.
    unreadable = [Unreadable(path, "it is a folder: attach the files in it, or add the folder as a collection",
                             UnreadableCause.NOT_A_DOCUMENT) for path in paths if path.is_dir()]
    try:
        results = list(read([path for path in paths if not path.is_dir()]))
    except RuntimeError as error:  # the reader's child process could not start (LimitedChild)
        raise AttachmentsUnreadable((), f"Kestrel could not start its document reader: {error}. Try again; if it "
                                        "goes on, close other programs to free memory.") from None
    for result in results:
        if isinstance(result, Unreadable):
            unreadable.append(result)
            continue
        attached = attached_file(result)
        if len(attached.text) > MAX_ATTACHED_CHARS:
            unreadable.append(Unreadable(result.path, f"it holds {len(attached.text):,} characters of text, more "
                                                      f"than the {MAX_ATTACHED_CHARS:,} a chat keeps of one file",
                                         UnreadableCause.TOO_LARGE))
        else:
            files.append(attached)
    if unreadable:
        raise AttachmentsUnreadable(unreadable)
    return tuple(files)


async def read_in_worker_off_loop(paths: Sequence[Path]) -> tuple[AttachedFile, ...]:
    """read_attachments in the reader's worker process (a file that crashes or hangs a parser
    is refused, never Kestrel), waited for on a thread so the event loop goes on."""
    from app.documents.reader_worker import read_in_worker

    return await asyncio.to_thread(read_attachments, [Path(path) for path in paths], read_in_worker)


def attached_file(document: DocumentText) -> AttachedFile:
    """The history's value of a document the reader read (its size as the file is now). A name
    that is not valid UTF-8 is kept with \ufffd: the history, the prompt and the window take no
    lone surrogate, and the file is never opened again by this path."""
    try:
        size = document.path.stat().st_size
    except OSError:
        size = 0
    return AttachedFile(printable(str(document.path)), document.kind, size,
                        tuple(AttachedSection(s.text, s.page, s.heading) for s in document.sections), document.note)


def attachment_chunks(file: AttachedFile) -> tuple[Chunk, ...]:
    """The file cut into passages for retrieval (its sections as the reader left them: a kind
    this Kestrel does not read, from an import, is cut the same way)."""
    document = DocumentText(Path(file.path), file.kind,
                            tuple(Section(s.text, s.page, s.heading) for s in file.sections), file.note)
    return tuple(chunk_document(document, CHUNK_TOKENS, CHUNK_OVERLAP))
