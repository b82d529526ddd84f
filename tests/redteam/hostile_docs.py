"""Hostile inputs for the documents red team: a folder of a downloaded repository beside secrets, and .docx files whose zip directory lies."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

import docx

SECRET_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- zebrasecret"
SECRET_AWS = "aws_secret_access_key = walrussecret"
SECRET_NOTE = "the vault code is narwhalsecret"


def home_with_secrets(tmp_path: Path) -> tuple[Path, Path]:
    """A home folder with ~/.ssh/id_rsa, ~/.aws/credentials and ~/private/notes.txt, and a repository
    downloaded into ~/Downloads/repo (the collection's folder). Returns (home, repo)."""
    home = tmp_path / "home"
    for relative, text in ((".ssh/id_rsa", SECRET_KEY), (".aws/credentials", SECRET_AWS),
                           ("private/notes.txt", SECRET_NOTE)):
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(text, encoding="utf-8")
    repo = home / "Downloads" / "repo"
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("# Repo\n\nA downloaded repository about kestrels.\n", encoding="utf-8")
    return home, repo


def docx_parts(paragraphs: int = 1) -> dict[str, bytes]:
    """The members of a real .docx written by python-docx, with `paragraphs` of visible text."""
    document = docx.Document()
    for number in range(paragraphs):
        document.add_paragraph(f"Visible text {number}: kestrels hover over open ground.")
    buffer = io.BytesIO()
    document.save(buffer)
    with zipfile.ZipFile(buffer) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def lying_docx(path: Path, member: str, real_bytes: int, declared: int = 1000) -> Path:
    """A real .docx whose `member` really holds `real_bytes` (its own bytes, then spaces, which
    deflate about a thousand to one), and whose zip directory (the local header and the central
    directory) then says it holds `declared` bytes, with the CRC of those first bytes: a liar that
    zipfile's CRC check does not catch."""
    parts = docx_parts()
    head = parts[member]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            if name != member:
                archive.writestr(name, data)
                continue
            with archive.open(name, "w") as written:
                written.write(head)
                spaces, left = b" " * (1 << 20), real_bytes - len(head)
                while left > 0:
                    written.write(spaces[:left])
                    left -= len(spaces)
    first = (head + b" " * declared)[:declared]
    patch_directory(path, member, declared, zlib.crc32(first))
    return path


def patch_directory(path: Path, member: str, size: int, crc: int) -> None:
    """Make the zip's local header and central directory say `member` unpacks to `size` bytes with `crc`."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        local = archive.getinfo(member).header_offset
    assert data[local:local + 4] == b"PK\x03\x04"
    struct.pack_into("<I", data, local + 14, crc)
    struct.pack_into("<I", data, local + 22, size)
    end = data.rfind(b"PK\x05\x06")
    count, = struct.unpack_from("<H", data, end + 10)
    place, = struct.unpack_from("<I", data, end + 16)
    for _ in range(count):
        assert data[place:place + 4] == b"PK\x01\x02"
        name_length, extra_length, comment_length = struct.unpack_from("<HHH", data, place + 28)
        if data[place + 46:place + 46 + name_length] == member.encode():
            struct.pack_into("<I", data, place + 16, crc)
            struct.pack_into("<I", data, place + 24, size)
        place += 46 + name_length + extra_length + comment_length
    path.write_bytes(bytes(data))


def big_docx(path: Path, xml_bytes: int) -> Path:
    """A valid .docx (honest directory) whose document.xml holds about `xml_bytes` of paragraphs."""
    parts = docx_parts()
    head, tail = parts["word/document.xml"].split(b"<w:body>")
    paragraph = b"<w:p><w:r><w:t>Kestrels hover over open ground, farmland, moors and road verges.</w:t></w:r></w:p>"
    block = paragraph * 1000
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            if name != "word/document.xml":
                archive.writestr(name, data)
                continue
            with archive.open(name, "w") as written:
                written.write(head + b"<w:body>")
                for _ in range(max(1, xml_bytes // len(block))):
                    written.write(block)
                written.write(tail)
    return path
