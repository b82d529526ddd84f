"""Reading real files of each kind, written by the libraries that write them: text, headings, pages."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from app.documents.readers import format_of
from app.documents.reading import read_document
from app.documents.values import (DocumentText, ReadLimits, Section, Unreadable, UnreadableCause,
                                  source_label)
from tests.helpers.doc_files import write_docx, write_image_only_pdf, write_pdf


def read_ok(path: Path) -> DocumentText:
    result = read_document(path)
    assert isinstance(result, DocumentText), result
    return result


def refused(path: Path, limits: ReadLimits = ReadLimits()) -> Unreadable:
    result = read_document(path, limits=limits)
    assert isinstance(result, Unreadable), result
    return result


def test_a_multi_page_pdf_keeps_its_pages_and_its_bookmarks_as_headings(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "report.pdf", [
        [(None, "Annual report of the bird survey.")],
        [("Introduction", "Kestrels are small falcons."), ("Method", "We counted birds at dawn.")],
        [(None, "The counts were repeated weekly.")],
    ])
    doc = read_ok(path)
    assert doc.kind == "pdf"
    assert [(s.page, s.heading) for s in doc.sections] == [
        (1, None), (2, "Introduction"), (2, "Method"), (3, "Method")]
    assert doc.sections[1].text == "Introduction\nKestrels are small falcons."
    assert "repeated weekly" in doc.sections[3].text
    assert source_label(path, doc.sections[3].page, None) == "report.pdf, p. 3"


def test_a_pdf_without_a_text_layer_is_refused_as_scanned(tmp_path: Path) -> None:
    result = refused(write_image_only_pdf(tmp_path / "scan.pdf"))
    assert result.cause is UnreadableCause.NO_TEXT
    assert result.reason.startswith("scanned PDF without text")


def test_a_password_protected_pdf_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "secret.pdf", [[("Plans", "Secret plans.")]], owner_password="o", user_password="u")
    result = refused(path)
    assert result.cause is UnreadableCause.ENCRYPTED
    assert "password" in result.reason


def test_a_pdf_with_only_an_owner_password_is_read(tmp_path: Path) -> None:
    # Printing/copying restrictions without an open password: every viewer shows the text.
    path = write_pdf(tmp_path / "locked.pdf", [[("Plans", "Public plans.")]], owner_password="owner")
    assert "Public plans." in read_ok(path).sections[0].text


def test_a_truncated_pdf_is_refused_as_damaged(tmp_path: Path) -> None:
    whole = write_pdf(tmp_path / "whole.pdf", [[(None, "x" * 50)]]).read_bytes()
    path = tmp_path / "cut.pdf"
    path.write_bytes(whole[: len(whole) // 3])
    result = refused(path)
    assert result.cause is UnreadableCause.DAMAGED and "damaged PDF" in result.reason


def test_a_docx_keeps_headings_from_its_styles_and_its_table(tmp_path: Path) -> None:
    doc = read_ok(write_docx(tmp_path / "guide.docx"))
    assert doc.kind == "docx"
    assert [s.heading for s in doc.sections] == ["Field Guide", "Habitat", "Habitat › Nesting", "Diet"]
    assert doc.sections[2].text == "Nesting\nOld crow nests and ledges.\nMonth | Eggs\nMay | 4-6"
    assert all(s.page is None for s in doc.sections)


def test_a_file_that_is_not_a_docx_is_refused_as_damaged(tmp_path: Path) -> None:
    path = tmp_path / "fake.docx"
    path.write_text("just text, not a zip")
    result = refused(path)
    assert result.cause is UnreadableCause.DAMAGED and "not a valid .docx" in result.reason


def test_a_password_protected_word_file_is_named_so(tmp_path: Path) -> None:
    path = tmp_path / "locked.docx"
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(4096))
    assert refused(path).cause is UnreadableCause.ENCRYPTED


def test_markdown_headings_nest_and_code_fences_are_not_headings(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("Preface.\n\n# Install\nSteps.\n\n## Setup\n```sh\n# not a heading\n```\n\n"
                    "Usage\n-----\nRun it.\n\n# Other #\nEnd.\n", encoding="utf-8")
    doc = read_ok(path)
    assert [s.heading for s in doc.sections] == [None, "Install", "Install › Setup", "Install › Usage", "Other"]
    assert doc.sections[2].text == "## Setup\n```sh\n# not a heading\n```"
    assert source_label(path, None, doc.sections[2].heading) == "notes.md › Install › Setup"


def test_html_gives_visible_text_and_headings_without_scripts_or_styles(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(
        "<html><head><title>T</title><style>p {color: red}</style></head><body>"
        "<p>Intro &amp; welcome</p><script>var s = '<h1>fake</h1>';</script>"
        "<h1>Guide</h1><p>First   step.</p><h2>Setup <small>v2</small></h2><p>Run<br>it.</p>"
        "<table><tr><td>a</td><td>b</td></tr></table></body></html>", encoding="utf-8")
    doc = read_ok(path)
    assert [(s.heading, s.text) for s in doc.sections] == [
        (None, "Intro & welcome"),
        ("Guide", "Guide\n\nFirst step."),
        ("Guide › Setup v2", "Setup v2\n\nRun\nit.\n\n| a | b"),
    ]


def test_an_html_page_in_its_declared_legacy_encoding(tmp_path: Path) -> None:
    path = tmp_path / "old.htm"
    path.write_bytes('<meta charset="iso-8859-7"><p>Καλημέρα</p>'.encode("iso-8859-7"))
    doc = read_ok(path)
    assert doc.sections[0].text == "Καλημέρα" and "iso-8859-7" in doc.note


@pytest.mark.parametrize(("bom", "encoding"), [
    (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
])
def test_text_with_a_byte_order_mark(tmp_path: Path, bom: bytes, encoding: str) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(bom + "Grüße, 世界".encode(encoding))
    doc = read_ok(path)
    assert doc.sections == (Section("Grüße, 世界", None, None),) and doc.note == ""


def test_code_is_one_section_without_headings(tmp_path: Path) -> None:
    path = tmp_path / "tool.py"
    path.write_text("# comment, not a heading\ndef f() -> int:\n    return 1\n", encoding="utf-8")
    doc = read_ok(path)
    assert doc.kind == "code"
    assert doc.sections == (Section("# comment, not a heading\ndef f() -> int:\n    return 1", None, None),)


def test_kinds_come_from_the_name() -> None:
    def kind(name: str) -> str | None:
        found = format_of(Path(name))
        return found.kind if found else None

    assert (kind("A.PDF"), kind("x/README"), kind("x/readme"), kind("src/Makefile")) == ("pdf", "text", "text", "code")
    assert kind("photo.jpg") is None and kind("old.doc") is None and kind("notes") is None


def test_a_kind_kestrel_does_not_read_is_refused_with_what_it_reads(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    path.write_bytes(b"\xff\xd8\xff")
    result = refused(path)
    assert result.cause is UnreadableCause.NOT_A_DOCUMENT and ".jpg" in result.reason and "PDF" in result.reason


def test_empty_and_blank_files_have_no_text(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "blank.md").write_text("\n   \n\t\n")
    assert refused(tmp_path / "empty.txt").cause is UnreadableCause.NO_TEXT
    assert refused(tmp_path / "blank.md").cause is UnreadableCause.NO_TEXT


def test_source_labels() -> None:
    assert source_label(Path("/home/a/report.pdf"), 12, None) == "report.pdf, p. 12"
    assert source_label("notes.md", None, "Setup") == "notes.md › Setup"
    assert source_label("r.pdf", 3, "Results") == "r.pdf, p. 3 › Results"
    assert source_label("plain.txt", None, None) == "plain.txt"
