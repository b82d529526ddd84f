"""Scanning a collection's folder: documents only, nothing hidden, and no link can make it loop."""

from __future__ import annotations

import os
from pathlib import Path

from app.documents.scan import scan_folder


def test_documents_are_found_and_the_rest_left_out(tmp_path: Path) -> None:
    for name in ("a.txt", "b.MD", "deep/er/c.pdf", "deep/d.docx", "e.py", "image.png", "archive.zip", ".dot.txt",
                 ".git/config.txt", "node_modules/pkg/readme.md", "~$report.docx", "noext", "README"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x" * len(name), encoding="utf-8")
    found = scan_folder(tmp_path)
    assert sorted(found) == ["README", "a.txt", "b.MD", "deep/d.docx", "deep/er/c.pdf", "e.py"]
    stat = (tmp_path / "deep/er/c.pdf").stat()
    assert (found["deep/er/c.pdf"].size, found["deep/er/c.pdf"].mtime_ns) == (stat.st_size, stat.st_mtime_ns)


def test_links_never_make_the_walk_loop(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "note.txt").write_text("n", encoding="utf-8")
    os.symlink(root, root / "sub" / "up")  # a folder link back to the top: a loop if followed
    os.symlink(root / "sub" / "loop_a.txt", root / "sub" / "loop_b.txt")
    os.symlink(root / "sub" / "loop_b.txt", root / "sub" / "loop_a.txt")  # a circular file link
    os.symlink(tmp_path / "missing.txt", root / "broken.txt")
    os.symlink("sub/note.txt", root / "linked.md")  # a link to a file inside is followed to the file
    found = scan_folder(root)
    assert sorted(found) == ["linked.md", "sub/note.txt"]
    assert found["linked.md"].size == len("n") and not found["linked.md"].skipped


def test_links_out_of_the_folder_are_listed_as_skipped_never_followed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside.md"
    outside.write_text("outside", encoding="utf-8")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret.txt").write_text("s", encoding="utf-8")
    os.symlink(outside, root / "linked.md")
    os.symlink("../../outside.md", root / "sub" / "up.txt")
    os.symlink(tmp_path / "elsewhere", root / "sub" / "away")
    os.symlink(outside, root / "key")  # not a document's name: left out like any other such file
    os.symlink("sub", root / "inner")  # a folder inside: its files are found where they are
    found = scan_folder(root)
    assert sorted(found) == ["linked.md", "sub/away", "sub/up.txt"]
    assert found["linked.md"].skipped.startswith(f"a link to {outside}, outside the collection's folder")
    assert found["sub/up.txt"].skipped.startswith(f"a link to {outside}, outside")
    assert found["sub/away"].skipped.startswith(f"a link to the folder {tmp_path / 'elsewhere'}, outside")


def test_a_cancelled_scan_stops(tmp_path: Path) -> None:
    for number in range(3):
        (tmp_path / f"d{number}").mkdir()
        (tmp_path / f"d{number}" / "x.txt").write_text("x", encoding="utf-8")
    assert scan_folder(tmp_path, lambda: True) == {}
    assert len(scan_folder(tmp_path)) == 3
