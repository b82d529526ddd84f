"""The document formats Kestrel reads: each module or subpackage here declares one and registers it; this is the registry.

A reader is one module (a subpackage where its parser is large or loads a native library:
its __init__ registers, the parser is imported inside the read function, so that listing the
formats costs the window nothing); text_files.py holds what the text readers share.
Everything that must know the formats asks here: the reader's dispatch (app/documents/reading.py),
the folder scan, the attach check's words, the window's file dialog and the CLI's help. The
modules are found with pkgutil, which the frozen build supports too (PyInstaller's pkgutil hook
lists the modules build.spec collects).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from app.documents.values import ReadLimits, Section


@dataclass(frozen=True)
class OpenedFile:
    """What a reader is handed: the file open for reading (read it, never `path` again: the
    path was checked, the open file is what passed), its size when checked, and the limits."""

    path: Path
    file: BinaryIO
    size: int
    limits: ReadLimits


@dataclass(frozen=True)
class ReadText:
    """A reader's result: the sections in reading order (none: the file has no text) and a
    note on what was adjusted on the way ("" for nothing)."""

    sections: tuple[Section, ...]
    note: str = ""


ReadFunction = Callable[[OpenedFile], ReadText]


@dataclass(frozen=True)
class DocumentFormat:
    """One kind of file Kestrel reads, as its reader declares it.

    `kind` is written to disk (an attached file's kind in the history and in chat exports):
    never change or reuse one. `name` is how a list of formats names it to the user ("Word
    .docx"), `noun` one file of it in a sentence ("Word document"; "Word documents" with an s).
    `extensions` are lower case with their dot (".md"); `file_names` are names without an
    extension that are this format by convention, spelled as usual ("README", "Makefile"; any
    case matches). `whole_in_memory`: the reader
    takes the whole file into memory, so it is held to ReadLimits.max_text_bytes instead of
    max_file_bytes. `order` places it in the lists the user sees (most asked-for first)."""

    kind: str
    name: str
    noun: str
    extensions: tuple[str, ...]
    mime_types: tuple[str, ...]
    read: ReadFunction
    file_names: tuple[str, ...] = ()
    whole_in_memory: bool = False
    order: int = 100

    def size_limit(self, limits: ReadLimits) -> int:
        """The most bytes a file of this format may hold to be read."""
        return limits.max_text_bytes if self.whole_in_memory else limits.max_file_bytes


_formats: dict[str, DocumentFormat] = {}
_by_extension: dict[str, DocumentFormat] = {}
_by_name: dict[str, DocumentFormat] = {}
_found = False


def document_format(*, kind: str, name: str, noun: str, extensions: tuple[str, ...], mime_types: tuple[str, ...],
                    file_names: tuple[str, ...] = (), whole_in_memory: bool = False,
                    order: int = 100) -> Callable[[ReadFunction], ReadFunction]:
    """Register the decorated function as the reader of this format (see DocumentFormat)."""

    def registered(read: ReadFunction) -> ReadFunction:
        register(DocumentFormat(kind, name, noun, extensions, mime_types, read, file_names, whole_in_memory, order))
        return read

    return registered


def register(document: DocumentFormat) -> None:
    """Add a format; a kind, extension or file name another format has already is a bug."""
    for extension in document.extensions:
        if not (extension.startswith(".") and extension.count(".") == 1 and extension == extension.lower()):
            raise ValueError(f"{document.kind}: {extension!r} is not a lower-case extension with one dot")
    taken = ([f"kind {document.kind!r}"] if document.kind in _formats else []) + \
            [f"extension {e!r} ({_by_extension[e].kind})" for e in document.extensions if e in _by_extension] + \
            [f"file name {n!r} ({_by_name[n.lower()].kind})" for n in document.file_names if n.lower() in _by_name]
    if taken:
        raise ValueError(f"{document.kind}: {', '.join(taken)} already registered")
    _formats[document.kind] = document
    _by_extension.update(dict.fromkeys(document.extensions, document))
    _by_name.update(dict.fromkeys((name.lower() for name in document.file_names), document))


def _find_readers() -> None:
    """Import every module and subpackage of this package once: each registers its format."""
    global _found
    if _found:
        return
    _found = True
    modules = [module.name for module in pkgutil.iter_modules(__path__, f"{__name__}.")]
    for name in modules:
        importlib.import_module(name)
    if not modules:  # a bug of the build, not of a file: say so instead of "it reads " and nothing
        raise RuntimeError(f"no document reader was found in {__name__}: a frozen build must collect its modules "
                           "(build.spec: collect_submodules)")


def all_formats() -> tuple[DocumentFormat, ...]:
    """Every format Kestrel reads, in the order the user is shown them."""
    _find_readers()
    return tuple(sorted(_formats.values(), key=lambda document: (document.order, document.name.lower())))


def format_of(path: Path) -> DocumentFormat | None:
    """The format of the file `path` names, by its extension (or, without one, its name); None
    when Kestrel does not read that kind of file (the scan skips it, an attachment is refused)."""
    _find_readers()
    if path.suffix:
        return _by_extension.get(path.suffix.lower())
    return _by_name.get(path.name.lower())


def formats_in_words() -> str:
    """The formats for a sentence: "PDF, Word .docx, Markdown, text, HTML and source code"."""
    names = [document.name for document in all_formats()]
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


def file_patterns() -> str:
    """The extensions as a file dialog's filter takes them: "*.pdf *.docx *.md …"."""
    return " ".join(f"*{extension}" for document in all_formats() for extension in document.extensions)


def reader_modules() -> tuple[str, ...]:
    """The modules that registered a format, for the reader's child process to import: it then
    reads with the same formats as this process, one registered outside this package included."""
    return tuple(dict.fromkeys(document.read.__module__ for document in all_formats()))
