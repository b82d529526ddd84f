"""What the text readers share: bytes decoded without losing anything silently, one plain section, a heading path."""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass

from app.documents.readers import OpenedFile
from app.documents.refusal import Refused
from app.documents.values import Section, UnreadableCause as Cause

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


def decoded_text(opened: OpenedFile, charset_of: Callable[[bytes], str | None] = lambda data: None) -> Decoded:
    """The open file read whole and decoded (decode_text; `charset_of` finds the encoding its
    bytes declare, as an HTML page's <meta> does); refused when its bytes are not text."""
    data = opened.file.read(opened.size + 1)[:opened.size]  # a file that grew since its size was taken: as it was
    try:
        return decode_text(data, charset_of(data))
    except NotText:
        raise Refused(Cause.NOT_A_DOCUMENT, f"not text: it looks like a binary file with a "
                                            f"{opened.path.suffix or 'text'} name") from None


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
