"""Files attached to a chat and the sources an answer was given, as the history keeps them."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

# What a file attached to one message may hold, as kept in the history: past it the file is
# refused when attached (the reader's own limit for a text file is 20 MB). A chat export
# carries the text, so the same limit bounds what an import may bring in.
MAX_ATTACHED_CHARS = 5_000_000
# A message's attachments, and an answer's sources: far above any real chat.
MAX_ATTACHMENTS = 100
MAX_SOURCES = 100

_SEPARATORS = re.compile(r"[\\/]")

# Images: the suffixes a file picker and a drop take as images (the check goes by the file's
# first bytes, not its name), and how many one message may carry (each costs the model hundreds
# of tokens, and a small vision model loses track of more).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp")
MAX_IMAGES = 8
# What one image kept in the history or brought by an import may hold: the check writes at most
# about 1.5 MB (app/documents/image_check.py); a file from elsewhere gets this much room.
MAX_IMAGE_BYTES = 10 * 1024 * 1024
# The types a kept image may have: what the check writes.
IMAGE_MIMES = ("image/png", "image/jpeg")
# What an image costs in the context, as counted when a chat's material is fitted: Gemma 3 gives
# each image 256 tokens; a model that tiles large images (Qwen2.5-VL) takes more, which the
# engine's own count then says.
IMAGE_TOKENS = 300
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
# A BMP's "BM" alone starts many a text: its info header's size (at byte 14) must be one of these.
_BMP_HEADERS = (12, 40, 52, 56, 64, 108, 124)


def is_image_path(path: str | os.PathLike[str]) -> bool:
    """True if the file's name ends as an image's does (any case): what the window sends to the
    image check rather than the document reader."""
    return os.fspath(path).lower().endswith(IMAGE_SUFFIXES)


def image_type(data: bytes) -> str | None:
    """The image's MIME type by its first bytes (PNG, JPEG, WebP, GIF, BMP), or None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:2] == b"BM" and int.from_bytes(data[14:18], "little") in _BMP_HEADERS:
        return "image/bmp"
    return next((mime for magic, mime in _MAGIC if data.startswith(magic)), None)


@dataclass(frozen=True)
class AttachedSection:
    """A stretch of an attached file under one heading and on one page (as the reader found it):
    `heading` is the path of headings above it ("Intro › Setup"), `page` counts from 1 (PDF only)."""

    text: str
    page: int | None = None
    heading: str | None = None


@dataclass(frozen=True)
class AttachedFile:
    """A file the user attached to a message, and the text read from it then.

    The text is kept, not only the path: the chat answers from it after the file is moved
    or changed, after a restart, and on another machine after an export and import (where
    `path` names the file on the machine that attached it). `kind` is the kind of the
    document format that read it ("text", "markdown", "code", "html", "pdf", "docx", or a later
    reader's: app/documents/readers); `size` its bytes when read;
    `note` what the reader adjusted (an encoding guessed; "" for nothing).
    """

    path: str
    kind: str
    size: int
    sections: tuple[AttachedSection, ...]
    note: str = ""

    @property
    def name(self) -> str:
        """The file's name, whichever system's separators the path was written with."""
        return _SEPARATORS.split(self.path)[-1] or self.path

    @property
    def text(self) -> str:
        """The whole text, a PDF's pages marked ("(p. 3)") so an answer can name one."""
        return "\n\n".join(f"(p. {section.page})\n{section.text}" if section.page is not None else section.text
                           for section in self.sections)


@dataclass(frozen=True)
class AttachedImage:
    """An image the user attached to a message, as Kestrel's image check left it and as the
    model is given it: `data` a PNG or JPEG (`mime` "image/png" or "image/jpeg") of `width` x
    `height` pixels, scaled down and without metadata. `name` is the file's name as the user
    had it ("Pasted image" for one pasted from the clipboard); `note` what the check changed
    ("Scaled down from 4032 x 3024."; "" for nothing)."""

    name: str
    mime: str
    width: int
    height: int
    data: bytes
    note: str = ""


@dataclass(frozen=True)
class SourceRef:
    """One numbered source an answer was given ([number] in its text): which file, where in
    it, and the text the model read. `path` is the file's on this machine (an attachment's as
    it was attached, a collection's as indexed)."""

    number: int
    path: str
    page: int | None
    heading: str | None
    text: str
