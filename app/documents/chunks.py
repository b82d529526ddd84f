"""Cutting a document into chunks to index and quote: each keeps its section's heading and page."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from app.documents.values import Chunk, DocumentText, Section

# Whitespace-separated words; a "word" longer than this many characters a token (a base64 blob,
# a minified line) is cut into pieces, the one place a chunk ends inside one.
_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"[.!?:;][\"')\]]*$")
# Where in a full chunk a paragraph or sentence break is looked for: its last 40 %.
_BREAK_WINDOW = 0.4


def estimate_tokens(text: str) -> int:
    """About 4 characters a token for ASCII text, one a character beyond it (accented letters,
    CJK, Cyrillic split into more pieces): errs high, so a chunk fits the embedder's window."""
    return math.ceil(_raw_tokens(text))


def _raw_tokens(text: str) -> float:
    ascii_chars = len(text.encode("ascii", errors="ignore"))
    return ascii_chars / 4 + (len(text) - ascii_chars)


def chunk_document(doc: DocumentText, target_tokens: int = 512, overlap: int = 64) -> list[Chunk]:
    """Chunks of about `target_tokens` (estimated), never spanning two sections, so each has one
    heading and one page. A section longer than a chunk is split at a paragraph or sentence end
    near the target (else between words), each piece repeating the last `overlap` tokens of the
    one before. A section that is a heading line alone joins the next section on its page."""
    if target_tokens < 1 or not 0 <= overlap < target_tokens:
        raise ValueError(f"chunk size {target_tokens} with overlap {overlap}")
    chunks: list[Chunk] = []
    for section in _merged_heading_lines(doc.sections):
        for text in _split(section.text, target_tokens, overlap):
            chunks.append(Chunk(text, section.page, section.heading, len(chunks), estimate_tokens(text)))
    return chunks


def _merged_heading_lines(sections: Sequence[Section]) -> list[Section]:
    """A heading with nothing under it before the next heading ("Setup" then "Setup › Linux") is
    carried into the next section on the same page, instead of becoming a one-line chunk."""
    merged: list[Section] = []
    carried: Section | None = None
    for section in sections:
        if carried is not None and carried.page == section.page:
            section = Section(f"{carried.text}\n{section.text}", section.page, section.heading)
        elif carried is not None:
            merged.append(carried)
        carried = None
        if _heading_alone(section):
            carried = section
        else:
            merged.append(section)
    if carried is not None:
        merged.append(carried)
    return merged


def _heading_alone(section: Section) -> bool:
    """The section's text is one short line holding its own heading's title ("## Setup")."""
    if section.heading is None or "\n" in section.text or estimate_tokens(section.text) > 32:
        return False
    return section.heading.split(" › ")[-1] in section.text


def _split(text: str, target: int, overlap: int) -> list[str]:
    if estimate_tokens(text) <= target:
        return [text]
    spans = _word_spans(text, target)
    # A word's cost includes the space after it, so a run of words costs what its text does.
    starts = [start for start, _ in spans[1:]] + [len(text)]
    costs = [_raw_tokens(text[start:after]) for (start, _), after in zip(spans, starts)]
    pieces = []
    first = 0
    while first < len(spans):
        end, total = first, 0.0
        while end < len(spans) and (end == first or total + costs[end] <= target):
            total += costs[end]
            end += 1
        if end < len(spans):
            end = _better_break(text, spans, first, end)
        pieces.append(text[spans[first][0]:spans[end - 1][1]])
        if end >= len(spans):
            break
        first = _overlap_start(costs, first, end, overlap)
    return pieces


def _word_spans(text: str, target: int) -> list[tuple[int, int]]:
    longest = target * 4
    spans = []
    for match in _WORD.finditer(text):
        start, end = match.span()
        while end - start > longest:
            spans.append((start, start + longest))
            start += longest
        spans.append((start, end))
    return spans


def _better_break(text: str, spans: list[tuple[int, int]], first: int, end: int) -> int:
    """Move the end of a full chunk back to a paragraph end, else a sentence end, within the last
    part of the chunk; keep it where it is when there is neither."""
    earliest = first + max(1, int((end - first) * (1 - _BREAK_WINDOW)))
    sentence = None
    for last in range(end - 1, earliest - 1, -1):
        gap = text[spans[last][1]:spans[last + 1][0]]
        if "\n\n" in gap or "\n\r\n" in gap:
            return last + 1
        if sentence is None and _SENTENCE_END.search(text[spans[last][0]:spans[last][1]]):
            sentence = last + 1
    return sentence if sentence is not None else end


def _overlap_start(costs: list[float], first: int, end: int, overlap: int) -> int:
    """The first word of the next chunk: as far back from `end` as `overlap` tokens reach, but
    always after `first`, so every chunk moves on."""
    start, total = end, 0.0
    while start - 1 > first and total + costs[start - 1] <= overlap:
        start -= 1
        total += costs[start]
    return start
