"""Render resources/icon.svg into resources/icons/: kestrel.ico (16-256 px) and one PNG per size.

    python scripts/make_icons.py [--out DIR]

Run it after changing the SVG and commit what it writes: the build and the app use
the rendered files, so neither needs an SVG renderer. Uses Qt's QSvgRenderer
(PySide6-Essentials ships QtSvg); the .ico is written here, not by a Qt plugin, so its
layout is the one Windows and NSIS expect: 32-bit bitmaps below 256 px, PNG at 256.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "resources" / "icon.svg"
ICONS = ROOT / "resources" / "icons"
# What Windows asks an .ico for (Explorer, the taskbar, Start, Alt+Tab at 100-200 % scale).
SIZES = (16, 20, 24, 32, 40, 48, 64, 128, 256)


def render(size: int, source: Path = SOURCE):
    """The SVG drawn at size x size, as a QImage in ARGB32 (not premultiplied)."""
    from PySide6.QtCore import QRectF, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(source))
    if not renderer.isValid():
        raise SystemExit(f"{source} is not an SVG Qt can draw.")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return image.convertToFormat(QImage.Format.Format_ARGB32)


def png_bytes(image) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice

    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    buffer.close()
    return bytes(data.data())


def dib_bytes(image) -> bytes:
    """An .ico entry as a 32-bit bitmap: header, BGRA rows bottom-up, an empty AND mask.

    Qt's ARGB32 is B, G, R, A in memory on little-endian machines, the order a DIB wants.
    """
    size = image.width()
    row = size * 4
    bits = bytes(image.constBits())
    pixels = b"".join(bits[y * image.bytesPerLine():y * image.bytesPerLine() + row] for y in reversed(range(size)))
    mask = bytes(((size + 31) // 32) * 4 * size)
    header = struct.pack("<IiiHHIIiiII", 40, size, size * 2, 1, 32, 0, len(pixels) + len(mask), 0, 0, 0, 0)
    return header + pixels + mask


def ico_bytes(images: dict[int, object]) -> bytes:
    """An .ico holding every size: bitmaps below 256 px (every reader takes them), PNG at 256."""
    blobs = [png_bytes(image) if size >= 256 else dib_bytes(image) for size, image in images.items()]
    offset = 6 + 16 * len(blobs)
    directory = struct.pack("<HHH", 0, 1, len(blobs))
    for size, blob in zip(images, blobs):
        # A width or height of 256 is written as 0.
        directory += struct.pack("<BBBBHHII", size % 256, size % 256, 0, 0, 1, 32, len(blob), offset)
        offset += len(blob)
    return directory + b"".join(blobs)


def make_icons(out: Path, source: Path = SOURCE) -> list[Path]:
    """Write kestrel.ico and kestrel-<size>.png into out; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    images = {size: render(size, source) for size in SIZES}
    written = []
    for size, image in images.items():
        path = out / f"kestrel-{size}.png"
        path.write_bytes(png_bytes(image))
        written.append(path)
    ico = out / "kestrel.ico"
    ico.write_bytes(ico_bytes(images))
    return written + [ico]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ICONS, help="where to write (default: resources/icons/)")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import qVersion
    from PySide6.QtGui import QGuiApplication

    # Without an application object the same SVG renders slightly differently (Qt's
    # defaults for painting come from it); with one, every run writes the same bytes.
    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    print(f"Rendering {SOURCE.name} with Qt {qVersion()} ({app.platformName()})")
    for path in make_icons(args.out):
        print(f"{path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
