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
    outside = tmp_path / "outside.md"
    outside.write_text("outside", encoding="utf-8")
    os.symlink(outside, root / "linked.md")  # a link to a file is followed to the file
    assert sorted(scan_folder(root)) == ["linked.md", "sub/note.txt"]
    assert scan_folder(root)["linked.md"].size == len("outside")


def test_a_cancelled_scan_stops(tmp_path: Path) -> None:
    for number in range(3):
        (tmp_path / f"d{number}").mkdir()
        (tmp_path / f"d{number}" / "x.txt").write_text("x", encoding="utf-8")
    assert scan_folder(tmp_path, lambda: True) == {}
    assert len(scan_folder(tmp_path)) == 3
