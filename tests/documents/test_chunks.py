"""Chunks keep their section's heading and page, split long sections with overlap, and never cut a word."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.documents.chunks import chunk_document, estimate_tokens
from app.documents.reading import read_document
from app.documents.values import DocumentText, Section, source_label
from tests.helpers.doc_files import write_pdf

WORDS = ("kestrel falcon hover vole meadow ledge wing feather talon dawn survey count "
         "nest egg moor verge").split()


def doc(*sections: Section, kind: str = "text") -> DocumentText:
    return DocumentText(Path("doc.txt"), kind, sections)


def prose(words: int, seed: int = 0) -> str:
    """Numbered words (w0-kestrel w1-falcon ...) so a test can see which words a chunk holds,
    in sentences of 12 words."""
    out = []
    for i in range(words):
        word = f"w{seed + i}-{WORDS[i % len(WORDS)]}"
        out.append(word + ("." if i % 12 == 11 else ""))
    return " ".join(out)


def numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\bw(\d+)-", text)]


def test_small_sections_are_one_chunk_each_with_their_heading_and_page() -> None:
    chunks = chunk_document(doc(Section("Intro\nHello there.", 1, "Intro"), Section("More.", 2, "Intro")))
    assert [(c.text, c.page, c.heading, c.ordinal) for c in chunks] == [
        ("Intro\nHello there.", 1, "Intro", 0), ("More.", 2, "Intro", 1)]
    assert chunks[0].tokens == estimate_tokens("Intro\nHello there.")


def test_a_long_section_is_split_near_the_target_with_overlap_and_no_word_cut() -> None:
    text = prose(2000)
    chunks = chunk_document(doc(Section(text, 7, "Results")), target_tokens=128, overlap=16)
    assert len(chunks) > 5
    assert all(c.page == 7 and c.heading == "Results" for c in chunks)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert all(c.tokens <= 128 for c in chunks)
    assert all(c.tokens >= 64 for c in chunks[:-1])  # a break moves back at most 40 %
    source_words = text.split()
    for chunk in chunks:
        # Whole words only: each chunk is a run of the section's own words.
        words = chunk.text.split()
        start = source_words.index(words[0])
        assert source_words[start:start + len(words)] == words
    for before, after in zip(chunks, chunks[1:]):
        first_after = numbers(after.text)[0]
        assert first_after <= numbers(before.text)[-1], "consecutive chunks share the overlap"
        shared = numbers(before.text)[-1] - first_after + 1
        assert 1 <= shared <= 16
    covered = sorted(set(n for c in chunks for n in numbers(c.text)))
    assert covered == list(range(2000)), "no word is lost between chunks"


def test_a_split_prefers_a_paragraph_end_then_a_sentence_end() -> None:
    first, second = prose(50), prose(50, seed=50)  # about 145 tokens each
    chunks = chunk_document(doc(Section(f"{first}\n\n{second}", None, None)), target_tokens=512, overlap=0)
    assert len(chunks) == 1  # it fits
    chunks = chunk_document(doc(Section(f"{first}\n\n{second}", None, None)), target_tokens=200, overlap=0)
    assert [c.text for c in chunks] == [first, second]
    sentences = chunk_document(doc(Section(prose(300), None, None)), target_tokens=200, overlap=0)
    assert all(c.text.endswith(".") for c in sentences[:-1])


def test_sections_never_share_a_chunk() -> None:
    chunks = chunk_document(doc(Section("# A\nalpha text", None, "A"), Section("# B\nbeta text", None, "B")))
    assert [c.heading for c in chunks] == ["A", "B"]


def test_a_heading_with_nothing_under_it_joins_the_next_section_on_its_page() -> None:
    chunks = chunk_document(doc(Section("# Setup", None, "Setup"), Section("## Linux\napt install", None, "Setup › Linux"),
                                Section("Chapter 2", 3, "Chapter 2"), Section("Text on p. 4", 4, "Chapter 2")))
    assert [(c.text, c.heading, c.page) for c in chunks] == [
        ("# Setup\n## Linux\napt install", "Setup › Linux", None),
        ("Chapter 2", "Chapter 2", 3), ("Text on p. 4", "Chapter 2", 4)]


def test_a_word_longer_than_a_chunk_is_the_one_thing_cut() -> None:
    blob = "A" * 5000
    chunks = chunk_document(doc(Section(f"key: {blob} end", None, None)), target_tokens=100, overlap=10)
    assert "".join(c.text for c in chunks).count("A") == 5000  # pieces of a whole chunk overlap nothing
    assert all(c.tokens <= 100 for c in chunks)
    assert chunks[0].text == "key:" and chunks[-1].text.endswith("A end")


def test_non_ascii_text_counts_more_tokens_a_character() -> None:
    assert estimate_tokens("abcdefgh") == 2
    assert estimate_tokens("日本語のテキスト") == 8
    chunks = chunk_document(doc(Section("語 " * 600, None, None)), target_tokens=256, overlap=32)
    assert len(chunks) >= 4 and all(c.tokens <= 256 for c in chunks)


@pytest.mark.parametrize(("target", "overlap"), [(0, 0), (100, 100), (100, -1)])
def test_impossible_sizes_are_a_bug(target: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_document(doc(Section("x", None, None)), target_tokens=target, overlap=overlap)


def test_chunks_of_a_real_pdf_name_their_page_and_bookmark(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "report.pdf", [[(None, "Cover.")], [("Results", prose(300))]])
    document = read_document(path)
    assert isinstance(document, DocumentText)
    chunks = chunk_document(document, target_tokens=128, overlap=16)
    assert len(chunks) > 3
    assert source_label(path, chunks[0].page, chunks[0].heading) == "report.pdf, p. 1"
    assert {source_label(path, c.page, c.heading) for c in chunks[1:]} == {"report.pdf, p. 2 › Results"}
