"""The image check: a file or pasted bytes made into the image a model is given, or refused in words.

Runs in the image worker's child process (app/documents/image_worker.py), never in the window's
or the engine's: a decoder is native code, and an image can be built to crash it or to claim
more pixels than any machine holds. Everything that can be told without decoding is told first:
the size of the file, its type by its first bytes (not its name), and its dimensions from its
header. Only then is it decoded, turned upright (EXIF), made RGB on white, scaled so its long
side is at most LONG_SIDE and written again without its metadata.
"""

from __future__ import annotations

import io
import os
import re
import stat
import struct
import warnings
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from app.core.attachments import AttachedImage, image_type

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

MAX_FILE_BYTES = 30 * 1024 * 1024
MAX_PIXELS = 100_000_000
# What a vision model is given: their encoders see 224-896 px tiles, so more only costs memory.
LONG_SIDE = 1536
# A PNG past this is written as a JPEG instead (a photo: PNG would be several MB).
PNG_LIMIT = 1_500_000
JPEG_QUALITY = 90
PASTED = "Pasted image"
READ_TYPES = "PNG, JPEG, WebP, GIF or BMP"


class ImageProblem(str, Enum):
    """Why an image was refused: what the user can do differs."""

    NO_ACCESS = "no_access"        # not there, a folder, not allowed
    NOT_AN_IMAGE = "not_an_image"  # text, or a type Kestrel does not read
    TOO_LARGE = "too_large"        # the file's bytes, or its pixels
    DAMAGED = "damaged"            # cut short, or its data cannot be decoded
    FAILED = "failed"              # the check itself ran out of time or memory, or crashed


@dataclass(frozen=True)
class ImageRefusal:
    """An image that will not do: `name` as the user knows it (the path given, or "Pasted
    image"), `reason` in words that finish "… cannot be used: ", and why, as `problem`."""

    name: str
    reason: str
    problem: ImageProblem


@dataclass(frozen=True)
class PastedImage:
    """Image bytes from the clipboard, with the name the message will show."""

    data: bytes
    name: str = PASTED


ImageInput = Path | PastedImage
ImageResult = AttachedImage | ImageRefusal


def check_image(item: ImageInput) -> ImageResult:
    """The image as a model is given it, or why not. Never raises for anything the image does."""
    if isinstance(item, PastedImage):
        if len(item.data) > MAX_FILE_BYTES:
            return ImageRefusal(item.name, _too_big(len(item.data)), ImageProblem.TOO_LARGE)
        return check_image_data(item.data, item.name)
    name = str(item)
    try:
        data = _read_file(item)
    except _Refusal as refusal:
        return ImageRefusal(name, refusal.reason, refusal.problem)
    return check_image_data(data, item.name, shown=name)


class _Refusal(Exception):
    def __init__(self, reason: str, problem: ImageProblem) -> None:
        super().__init__(reason)
        self.reason, self.problem = reason, problem


def _read_file(path: Path) -> bytes:
    try:
        # Non-blocking: a named pipe would otherwise wait for a writer for ever.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except IsADirectoryError:
        raise _Refusal("it is a folder: attach the images in it", ImageProblem.NO_ACCESS) from None
    except OSError as error:
        raise _Refusal(f"it cannot be opened ({error.strerror or error})", ImageProblem.NO_ACCESS) from None
    try:
        found = os.fstat(fd)
        if stat.S_ISDIR(found.st_mode):
            raise _Refusal("it is a folder: attach the images in it", ImageProblem.NO_ACCESS)
        if not stat.S_ISREG(found.st_mode):
            raise _Refusal("it is not a file", ImageProblem.NO_ACCESS)
        if found.st_size > MAX_FILE_BYTES:
            raise _Refusal(_too_big(found.st_size), ImageProblem.TOO_LARGE)
        file = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with file:
        try:
            data = file.read(MAX_FILE_BYTES + 1)  # it may have grown since fstat()
        except OSError as error:
            raise _Refusal(f"it cannot be read ({error.strerror or error})", ImageProblem.NO_ACCESS) from None
    if len(data) > MAX_FILE_BYTES:
        raise _Refusal(_too_big(len(data)), ImageProblem.TOO_LARGE)
    return data


def _too_big(size: int) -> str:
    return (f"it is {size / 2**20:,.1f} MB; Kestrel takes images up to {MAX_FILE_BYTES // 2**20} MB. "
            "Save a smaller copy (a screenshot of the part that matters will do)")


def check_image_data(data: bytes, name: str, *, shown: str | None = None) -> ImageResult:
    """The check on an image's bytes; `name` is the file's name the image keeps, `shown` how a
    refusal names it (the path given; the name by default)."""
    said = shown or name
    kind = image_type(data)
    if kind is None:
        return ImageRefusal(said, _not_an_image(data), ImageProblem.NOT_AN_IMAGE)
    try:
        return _converted(data, name)
    except _Refusal as refusal:
        return ImageRefusal(said, refusal.reason, refusal.problem)
    except MemoryError:
        return ImageRefusal(said, "reading it needed more memory than Kestrel gives its image check",
                            ImageProblem.FAILED)


def _not_an_image(data: bytes) -> str:
    if not data:
        return "the file is empty"
    head = data[:4096]
    if b"\0" not in head:
        try:
            head.decode("utf-8")
            return "it is not an image: it holds text"
        except UnicodeDecodeError as error:
            if error.start >= len(head) - 3:  # a character cut at the end of the sample
                return "it is not an image: it holds text"
    return f"it is not an image Kestrel reads ({READ_TYPES}), whatever its name says"


_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")


def _converted(data: bytes, name: str) -> AttachedImage:
    from PIL import Image, ImageOps  # in the child only: the window never decodes an image

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    damaged = (OSError, SyntaxError, ValueError, EOFError, IndexError, TypeError, KeyError, struct.error)
    try:
        with warnings.catch_warnings():
            # Between 1x and 2x the limit Pillow only warns: the check below refuses those.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=["PNG", "JPEG", "WEBP", "GIF", "BMP"])
    except Image.DecompressionBombError as error:
        found = _BOMB_PIXELS.search(str(error))
        size = f"{int(found.group(1)) / 1e6:,.0f} megapixels" if found else f"over {2 * MAX_PIXELS // 10**6} megapixels"
        raise _Refusal(_too_many_pixels(size), ImageProblem.TOO_LARGE) from None
    except damaged:
        raise _Refusal("it could not be read: the file is damaged, or not the image its first bytes say",
                       ImageProblem.DAMAGED) from None
    with image:
        width, height = image.size
        if width < 1 or height < 1:
            raise _Refusal("its header says it has no pixels: the file is damaged", ImageProblem.DAMAGED)
        if width * height > MAX_PIXELS:
            raise _Refusal(_too_many_pixels(f"{width:,} x {height:,} pixels"), ImageProblem.TOO_LARGE)
        try:
            if image.format == "JPEG":  # decode at a fraction of the size where that is enough
                image.draft("RGB", (LONG_SIDE, LONG_SIDE))
            image.load()
            upright = ImageOps.exif_transpose(image)
            rgb = _on_white(upright)
        except damaged:
            raise _Refusal("it could not be read: the file is damaged or cut short", ImageProblem.DAMAGED) from None
    shown_w, shown_h = _upright_size(rgb.size, (width, height))
    note = ""
    if max(rgb.size) > LONG_SIDE:
        scale = LONG_SIDE / max(rgb.size)
        rgb = rgb.resize((max(1, round(rgb.width * scale)), max(1, round(rgb.height * scale))),
                         Image.Resampling.LANCZOS)
    if max(shown_w, shown_h) > LONG_SIDE:
        note = f"Scaled down from {shown_w:,} x {shown_h:,}."
    rgb.info = {}  # no EXIF, ICC profile or text chunks: written again from the pixels alone
    mime, encoded = _encoded(rgb)
    return AttachedImage(name, mime, rgb.width, rgb.height, encoded, note)


def _too_many_pixels(size: str) -> str:
    return (f"it is {size}; Kestrel takes images of up to {MAX_PIXELS // 10**6} megapixels (one that claims more "
            "may be built to exhaust memory). Save a smaller copy")


def _upright_size(now: tuple[int, int], header: tuple[int, int]) -> tuple[int, int]:
    """The size the user's image had, upright: the header's, turned as the EXIF turned it (a JPEG
    decoded in draft mode is smaller than its header says)."""
    width, height = header
    turned = (now[0] >= now[1]) != (width >= height) and now[0] != now[1]
    return (height, width) if turned else (width, height)


def _on_white(image: PILImage) -> PILImage:
    """RGB, with what was transparent white (as a viewer shows it on a page)."""
    from PIL import Image

    has_alpha = image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)
    if not has_alpha:
        return image.convert("RGB")
    rgba = image.convert("RGBA")
    white = Image.new("RGB", rgba.size, (255, 255, 255))
    white.paste(rgba, mask=rgba.getchannel("A"))
    return white


def _encoded(image: PILImage) -> tuple[str, bytes]:
    out = io.BytesIO()
    image.save(out, format="PNG")
    if out.tell() <= PNG_LIMIT:
        return "image/png", out.getvalue()
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=JPEG_QUALITY)
    return "image/jpeg", out.getvalue()
