"""Image files for tests, made here with Pillow (real encoders) or by hand (a decompression bomb)."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

from PIL import Image


def image_bytes(width: int, height: int, fmt: str = "PNG", *, mode: str = "RGB",
                color: tuple[int, ...] = (200, 40, 40), exif_orientation: int | None = None, **save: object) -> bytes:
    """An image of one colour (noise where `color` is empty: a photo's size), encoded as `fmt`."""
    image = Image.effect_noise((width, height), 64).convert(mode) if not color else Image.new(mode, (width, height),
                                                                                               color)
    if exif_orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = exif_orientation
        save["exif"] = exif.tobytes()
    out = io.BytesIO()
    image.save(out, format=fmt, **save)
    return out.getvalue()


def write_image(path: Path, width: int, height: int, fmt: str = "PNG", **kwargs: object) -> Path:
    path.write_bytes(image_bytes(width, height, fmt, **kwargs))  # type: ignore[arg-type]
    return path


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def bomb_png(width: int = 50_000, height: int = 50_000) -> bytes:
    """A valid PNG header claiming width x height RGB pixels, with a few bytes of compressed data:
    decoded, it would need width * height * 3 bytes (7.5 GB for the default)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    row = b"\0" + b"\0" * 3 * 16
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(row * 16))
            + _chunk(b"IEND", b""))
