"""The document formats come from one registry: what it holds, what it refuses, and a reader added in one file.

The test reader (tests/documents/rot13_reader.py) is imported by the `rot13` fixture and named by
no other file: everything that knows the formats (the scan, the reader's child process, the attach
check, the CLI, the file dialog's filter) must take it from the registry alone."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.__main__ import main
from app.documents.reader_worker import read_in_worker
from app.documents.readers import (DocumentFormat, OpenedFile, ReadText, all_formats, file_patterns, format_of,
                                   formats_in_words, reader_modules, register)
from app.documents.scan import scan_folder
from app.documents.values import DocumentText, FolderFiles, Unreadable, UnreadableCause
from app.service.documents.attached_files import AttachmentsUnreadable, read_attachments

# Which kind each extension was read as before the registry (app/documents/kinds.py): the kinds
# are written to disk (an attached file's kind in the history and chat exports), so neither an
# extension's kind nor a kind's value may change.
_BEFORE = {
    "markdown": ".md .markdown .mdown .mkd .mdx",
    "text": ".txt .text .log .csv .tsv .rst .org .adoc .tex .srt .vtt",
    "html": ".html .htm .xhtml",
    "code": ".py .pyi .ipynb .js .mjs .cjs .ts .tsx .jsx .java .kt .kts .scala .groovy .c .h .cc .cpp .cxx .hpp .hh "
            ".m .mm .cs .fs .go .rs .rb .php .swift .dart .lua .pl .pm .r .jl .hs .ml .ex .exs .erl .clj .el .vim .sh "
            ".bash .zsh .fish .ps1 .bat .cmd .sql .css .scss .sass .less .vue .svelte .json .jsonl .yaml .yml .toml "
            ".ini .cfg .conf .xml .gradle .cmake .proto .graphql",
    "pdf": ".pdf",
    "docx": ".docx",
}
_NAMES_BEFORE = {"readme": "text", "license": "text", "copying": "text", "notice": "text", "authors": "text",
                 "changelog": "text", "makefile": "code", "dockerfile": "code"}
SECRET = "Uryyb sebz gur xrfgery arfg"  # ROT13 of the sentence below
PLAIN = "Hello from the kestrel nest"


@pytest.fixture
def rot13() -> DocumentFormat:
    """The test reader, registered by importing its module (it stays registered, as any reader would)."""
    importlib.import_module("tests.documents.rot13_reader")
    found = format_of(Path("x.rot13"))
    assert found is not None and found.kind == "test-rot13"
    return found


def kind_of(name: str) -> str | None:
    found = format_of(Path(name))
    return found.kind if found else None


def kestrel(*args: str) -> tuple[int, str, str]:
    """`kestrel ARGS` in this process (so that it knows the test reader): status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exit:  # argparse's --help
            status = int(exit.code or 0)
    return status, out.getvalue(), err.getvalue()


def test_every_extension_and_name_keeps_the_kind_it_had() -> None:
    shown = {extension: kind for kind, extensions in _BEFORE.items() for extension in extensions.split()}
    assert {extension: kind_of(f"a{extension}") for extension in shown} == shown
    assert {name: kind_of(f"src/{name.upper()}") for name in _NAMES_BEFORE} == _NAMES_BEFORE
    built_in = [document for document in all_formats() if document.read.__module__.startswith("app.")]
    assert sorted(document.kind for document in built_in) == sorted(_BEFORE)
    assert all(document.extensions and document.mime_types and document.noun for document in built_in)


def test_the_words_and_the_dialog_patterns_list_the_formats_most_asked_for_first() -> None:
    names = [document.name for document in all_formats()]
    assert names[:6] == ["PDF", "Word .docx", "Markdown", "text", "HTML", "source code"]
    assert formats_in_words() == ", ".join(names[:-1]) + f" and {names[-1]}"  # the test reader too, once imported
    assert file_patterns().startswith("*.pdf *.docx *.md *.markdown")
    assert all(f"*{extension}" in file_patterns().split() for extension in (".txt", ".html", ".py", ".graphql"))


def test_a_format_cannot_take_a_kind_an_extension_or_a_name_another_has() -> None:
    def read(opened: OpenedFile) -> ReadText:
        return ReadText(())

    def claiming(**fields: object) -> DocumentFormat:
        given: dict[str, object] = dict(kind="test-claim", name="claim", noun="claim", extensions=(".claim",),
                                        mime_types=(), read=read)
        return DocumentFormat(**{**given, **fields})  # type: ignore[arg-type]

    for taken, said in ((claiming(kind="pdf"), "kind 'pdf'"), (claiming(extensions=(".claim", ".md")), "'.md' (markdown)"),
                        (claiming(file_names=("ReadMe",)), "file name 'ReadMe' (text)")):
        with pytest.raises(ValueError, match=re.escape(said)):
            register(taken)
    for wrong in (".Claim", "claim", ".tar.claim"):
        with pytest.raises(ValueError, match="not a lower-case extension"):
            register(claiming(extensions=(wrong,)))
    # Refused whole: nothing of a refused format was kept.
    assert kind_of("a.claim") is None and kind_of("a.md") == "markdown" and kind_of("ReadMe") == "text"
    assert "claim" not in formats_in_words()


def test_listing_the_formats_loads_no_parser() -> None:
    """The window and the CLI list the formats at start; PDFium and python-docx load only where a file is read."""
    script = ("import sys; from app.documents.readers import all_formats, file_patterns; all_formats(); file_patterns(); "
              "print(sorted(m for m in ('pypdfium2', 'docx', 'lxml') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[2], check=True)
    assert done.stdout.strip() == "[]"
    assert all(module.startswith("app.documents.readers.") for module in reader_modules()
               if not module.startswith("tests."))


def test_a_reader_in_one_file_is_scanned_read_in_the_child_and_attached(rot13: DocumentFormat, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    (folder / "deep").mkdir(parents=True)
    secret = folder / "deep" / "greeting.rot13"
    secret.write_text(SECRET + "\n", encoding="utf-8")
    (folder / "other.rot14").write_text(SECRET, encoding="utf-8")
    assert sorted(scan_folder(folder)) == ["deep/greeting.rot13"]

    [read] = list(read_in_worker([secret]))  # in the reader's child process, which imports the module too
    assert isinstance(read, DocumentText) and (read.kind, read.sections[0].text) == ("test-rot13", PLAIN)

    [attached] = read_attachments([secret], read_in_worker)
    assert (attached.kind, attached.text, attached.name) == ("test-rot13", PLAIN, "greeting.rot13")


def test_a_new_readers_files_meet_the_same_checks(rot13: DocumentFormat, tmp_path: Path) -> None:
    """The size limit it declared, binary bytes, and a link out of a collection's folder: the
    reader's file says nothing about them, the registry's callers apply them to it."""
    folder = tmp_path / "notes"
    folder.mkdir()
    outside = tmp_path / "outside.rot13"
    outside.write_text(SECRET, encoding="utf-8")
    os.symlink(outside, folder / "linked.rot13")
    assert scan_folder(folder)["linked.rot13"].skipped.startswith(f"a link to {outside}, outside the collection's folder")
    [linked] = list(read_in_worker(FolderFiles(folder, [folder / "linked.rot13"])))
    assert isinstance(linked, Unreadable) and linked.cause is UnreadableCause.OUTSIDE_FOLDER

    binary = tmp_path / "binary.rot13"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    huge = tmp_path / "huge.rot13"
    with huge.open("wb") as file:
        file.truncate(21 * 2**20)  # past ReadLimits.max_text_bytes, which whole_in_memory chose
    [not_text, too_large] = list(read_in_worker([binary, huge]))
    assert isinstance(not_text, Unreadable) and not_text.cause is UnreadableCause.NOT_A_DOCUMENT
    assert "binary file with a .rot13 name" in not_text.reason
    assert isinstance(too_large, Unreadable) and too_large.cause is UnreadableCause.TOO_LARGE
    assert "Kestrel reads ROT13 files up to 20 MB" in too_large.reason


def test_the_refusals_the_cli_and_the_dialog_name_a_new_reader(rot13: DocumentFormat, tmp_path: Path) -> None:
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(b"\xff\xd8\xff")
    with pytest.raises(AttachmentsUnreadable) as refused:
        read_attachments([photo], read_in_worker)
    assert f"it reads {formats_in_words()}." in str(refused.value) and "and ROT13 text" in str(refused.value)
    assert "save it in a form Kestrel reads (PDF, Word .docx," in str(refused.value)
    assert "ROT13 text) and attach that." in str(refused.value)
    assert "*.rot13" in file_patterns().split()

    status, out, _ = kestrel("docs", "--help")
    assert status == 0 and "source code and ROT13 text)" in " ".join(out.split())
    status, out, _ = kestrel("docs", "add", "--help")
    assert status == 0 and "; ROT13 text (.rot13)." in " ".join(out.split())

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "greeting.rot13").write_text(SECRET, encoding="utf-8")
    status, out, err = kestrel("docs", "add", str(folder))
    assert status == 0 and "1 files" not in out and "notes: 1 file," in out, out + err
    status, out, err = kestrel("docs", "search", "kestrel nest", "--json")
    [hit] = [json.loads(line) for line in out.splitlines()]
    assert status == 0 and hit["path"].endswith("greeting.rot13") and hit["text"] == PLAIN, out + err
