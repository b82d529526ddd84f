"""Plain text, Markdown and source code: the bytes decoded without losing anything silently, Markdown's headings kept."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from app.documents.values import Section

# Byte order marks, longest first: UTF-32's little-endian mark begins with UTF-16's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# How much of the start of a file is looked at to tell text from binary.
_SNIFF_BYTES = 8192
# Control characters that text files do contain: tab, newline, form feed, carriage return, escape.
_TEXT_CONTROLS = frozenset(b"\t\n\x0b\x0c\r\x1b\x08")


class NotText(Exception):
    """The bytes are not text (a binary file with a text file's name)."""


@dataclass(frozen=True)
class Decoded:
    """Text and, when it was not plain UTF-8, what the user should know about how it was read."""

    text: str
    note: str = ""


def decode_text(data: bytes, declared: str | None = None) -> Decoded:
    """Decode a text file's bytes: a byte order mark wins, then UTF-8, then `declared` (an HTML
    page's charset), then Windows-1252 for a legacy file. Mostly-UTF-8 text with a few broken
    bytes keeps its UTF-8 and marks the broken bytes with U+FFFD, and the note says how many."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            text = data[len(bom):].decode(encoding, errors="replace")
            return Decoded(text, _replaced_note(text, encoding.upper()))
    if looks_binary(data[:_SNIFF_BYTES]):
        raise NotText
    try:
        return Decoded(data.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    if declared:
        try:
            return Decoded(data.decode(declared), f"read as {declared} (its declared encoding)")
        except (LookupError, UnicodeDecodeError):
            pass
    escaped = data.decode("utf-8", errors="surrogateescape")
    broken = sum(1 for c in escaped if "\udc80" <= c <= "\udcff")
    valid_non_ascii = sum(1 for c in escaped if c > "\x7f" and not "\udc80" <= c <= "\udcff")
    if valid_non_ascii >= broken:
        text = data.decode("utf-8", errors="replace")
        what = "1 byte that was" if broken == 1 else f"{broken} bytes that were"
        return Decoded(text, f"{what} not valid UTF-8 replaced with \ufffd")
    try:
        return Decoded(data.decode("cp1252"), "not UTF-8: read as Windows-1252 (Western European)")
    except UnicodeDecodeError:
        # Latin-1 maps every byte to a character: nothing is dropped, only possibly misnamed.
        return Decoded(data.decode("latin-1"), "not UTF-8: read as Latin-1 (Western European)")


def _replaced_note(text: str, encoding: str) -> str:
    bad = text.count("\ufffd")
    return f"{bad} broken {encoding} sequence{'s' if bad != 1 else ''} replaced with \ufffd" if bad else ""


def looks_binary(head: bytes) -> bool:
    """A NUL byte, or more than one byte in ten a control character that text does not use."""
    if b"\x00" in head:
        return True
    controls = sum(1 for byte in head if byte < 0x20 and byte not in _TEXT_CONTROLS)
    return controls * 10 > len(head)


def plain_sections(text: str) -> tuple[Section, ...]:
    """A text or code file is one section: it has neither headings nor pages."""
    text = text.strip()
    return (Section(text, None, None),) if text else ()


_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")


class HeadingPath:
    """The headings above the current line, by level: "Intro › Setup"."""

    def __init__(self) -> None:
        self._levels: list[tuple[int, str]] = []

    def enter(self, level: int, title: str) -> None:
        while self._levels and self._levels[-1][0] >= level:
            self._levels.pop()
        if title:
            self._levels.append((level, title))

    def label(self) -> str | None:
        return " › ".join(title for _, title in self._levels) or None


def markdown_sections(text: str) -> tuple[Section, ...]:
    """Split Markdown at its ATX (`## Setup`) and setext (underlined) headings, outside fenced
    code; each section keeps its own heading line as its first line."""
    sections: list[Section] = []
    path = HeadingPath()
    current: list[str] = []
    heading: str | None = None
    lines = text.splitlines()
    # YAML front matter ("---" ... "---" at the top) is kept as text, its closing line no heading.
    fence: str | None = "---" if lines and lines[0].strip() == "---" else None

    def close() -> None:
        body = "\n".join(current).strip()
        if body:
            sections.append(Section(body, None, heading))
        current.clear()

    for index, line in enumerate(lines):
        if index == 0 and fence is not None:
            current.append(line)
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            current.append(line)
            continue
        opening = _FENCE.match(line)
        if opening:
            fence = opening.group(1)
            current.append(line)
            continue
        atx = _ATX.match(line)
        underline = _SETEXT.match(lines[index + 1]) if index + 1 < len(lines) else None
        if atx:
            level, title = len(atx.group(1)), (atx.group(2) or "").strip()
        elif underline and line.strip() and not _LIST_ITEM.match(line) and not line.startswith(("    ", "\t")):
            level, title = (1 if underline.group(1).startswith("=") else 2), line.strip()
        else:
            if current or line.strip():
                current.append(line)
            continue
        close()
        path.enter(level, title)
        heading = path.label()
        current.append(line)
    close()
    return tuple(sections)
