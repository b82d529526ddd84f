"""Hostile files and parsers that hang, crash or eat memory: each becomes an Unreadable with the
reason, in the reader's child process, and the files after it are still read."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.documents.reader_worker import ReaderPool, read_in_worker
from app.documents.values import DocumentText, ReadLimits, Unreadable, UnreadableCause
from tests.helpers.doc_files import (crash_or_read, hang_or_read, hog_or_read, write_looping_pdf, write_pdf,
                                     write_sparse, write_zip_bomb_docx)

# Small limits so the tests are quick: a second a file, a 1 GB address space.
LIMITS = ReadLimits(seconds_per_file=1.5, memory_bytes=1 << 30, max_unpacked_bytes=20 << 20)


@pytest.fixture(scope="module")
def pool() -> Iterator[ReaderPool]:
    """One real reader child for the module's plain hostile files (starting one takes ~0.3 s)."""
    with ReaderPool(LIMITS) as shared:
        yield shared


def good_file(folder: Path) -> Path:
    path = folder / "good.md"
    path.write_text("# Fine\nStill read.\n", encoding="utf-8")
    return path


def unreadable(result: DocumentText | Unreadable) -> Unreadable:
    assert isinstance(result, Unreadable), result
    return result


def test_a_pdf_whose_page_tree_loops(pool: ReaderPool, tmp_path: Path) -> None:
    result = unreadable(pool.read(write_looping_pdf(tmp_path / "loop.pdf")))
    assert result.cause is UnreadableCause.DAMAGED and result.reason.startswith("damaged PDF")


def test_a_zip_bomb_docx_is_refused_by_its_declared_size_before_unpacking(pool: ReaderPool, tmp_path: Path) -> None:
    path = write_zip_bomb_docx(tmp_path / "bomb.docx", 64 << 20)
    assert path.stat().st_size < 1 << 20  # 64 MB of zeros in well under 1 MB on disk
    started = time.monotonic()
    result = unreadable(pool.read(path))
    assert result.cause is UnreadableCause.TOO_LARGE and "zip bomb" in result.reason
    assert time.monotonic() - started < 1.0  # refused, not inflated


@pytest.mark.parametrize("name", ["huge.txt", "huge.pdf"])
def test_a_2_gb_sparse_file_is_refused_by_its_size_alone(pool: ReaderPool, tmp_path: Path, name: str) -> None:
    path = write_sparse(tmp_path / name, 2 << 30)
    result = unreadable(pool.read(path))
    assert result.cause is UnreadableCause.TOO_LARGE and "2,048 MB" in result.reason


def test_a_symlink_loop(pool: ReaderPool, tmp_path: Path) -> None:
    (tmp_path / "a.txt").symlink_to(tmp_path / "b.txt")
    (tmp_path / "b.txt").symlink_to(tmp_path / "a.txt")
    result = unreadable(pool.read(tmp_path / "a.txt"))
    assert result.cause is UnreadableCause.NO_ACCESS and "link loop" in result.reason


def test_a_pipe_with_a_text_name_is_not_opened(pool: ReaderPool, tmp_path: Path) -> None:
    # Opening a FIFO for reading blocks until a writer comes: it must be refused by its type.
    os.mkfifo(tmp_path / "pipe.txt")
    result = unreadable(pool.read(tmp_path / "pipe.txt"))
    assert result.cause is UnreadableCause.NOT_A_DOCUMENT and "not a regular file" in result.reason


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root reads files whatever their permissions (the pipe test covers a file that cannot be opened)")
def test_a_file_without_read_permission(pool: ReaderPool, tmp_path: Path) -> None:
    path = tmp_path / "private.txt"
    path.write_text("secret")
    path.chmod(0)
    try:
        result = unreadable(pool.read(path))
    finally:
        path.chmod(0o600)
    assert result.cause is UnreadableCause.NO_ACCESS and "permissions" in result.reason


def test_invalid_utf8_keeps_the_text_and_says_what_was_replaced(pool: ReaderPool, tmp_path: Path) -> None:
    path = tmp_path / "mixed.txt"
    path.write_bytes("naïve café ".encode() + b"\xff\xfe broken " + "résumé".encode())
    result = pool.read(path)
    assert isinstance(result, DocumentText)
    assert result.sections[0].text == "naïve café \ufffd\ufffd broken résumé"
    assert result.note == "2 bytes that were not valid UTF-8 replaced with \ufffd"


def test_a_legacy_encoded_file_is_read_as_windows_1252_and_says_so(pool: ReaderPool, tmp_path: Path) -> None:
    path = tmp_path / "old.txt"
    path.write_bytes("Crème brûlée – 5 €".encode("cp1252"))
    result = pool.read(path)
    assert isinstance(result, DocumentText)
    assert result.sections[0].text == "Crème brûlée – 5 €" and "Windows-1252" in result.note


def test_a_binary_file_with_a_text_name_is_refused(pool: ReaderPool, tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_bytes(bytes(range(256)) * 8)
    result = unreadable(pool.read(path))
    assert result.cause is UnreadableCause.NOT_A_DOCUMENT and "binary" in result.reason


def test_a_file_gone_before_it_is_read(pool: ReaderPool, tmp_path: Path) -> None:
    result = unreadable(pool.read(tmp_path / "gone.md"))
    assert result.cause is UnreadableCause.NO_ACCESS and "gone" in result.reason


def test_a_parser_that_hangs_is_killed_after_the_limit_and_the_next_file_is_read(tmp_path: Path) -> None:
    hang = tmp_path / "hang.pdf"
    hang.write_bytes(b"%PDF-1.4")
    with ReaderPool(LIMITS, read=hang_or_read) as pool:
        started = time.monotonic()
        results = list(pool.read_all([hang, good_file(tmp_path)]))
        assert pool.restarts == 1
    stuck = unreadable(results[0])
    assert stuck.cause is UnreadableCause.TIMED_OUT and "1.5 s" in stuck.reason
    assert isinstance(results[1], DocumentText) and results[1].sections[0].heading == "Fine"
    assert time.monotonic() - started < 15


def test_a_parser_that_crashes_the_process_and_the_next_file_is_read(tmp_path: Path) -> None:
    crash = tmp_path / "crash.pdf"
    crash.write_bytes(b"%PDF-1.4")
    with ReaderPool(LIMITS, read=crash_or_read) as pool:
        good = good_file(tmp_path)
        results = list(pool.read_all([crash, good, crash, good]))
        assert pool.restarts == 2
    assert unreadable(results[0]).reason.startswith("the reader crashed on it (signal SIGABRT)")
    assert unreadable(results[2]).cause is UnreadableCause.DAMAGED
    assert isinstance(results[1], DocumentText) and isinstance(results[3], DocumentText)


@pytest.mark.skipif(os.name != "posix", reason="the memory cap is RLIMIT_AS (Linux, macOS)")
def test_a_reader_past_the_memory_cap_fails_that_file_only(tmp_path: Path) -> None:
    hog = tmp_path / "hog.docx"
    hog.write_bytes(b"PK")
    with ReaderPool(LIMITS, read=hog_or_read) as pool:
        results = list(pool.read_all([hog, good_file(tmp_path)]))
        assert pool.restarts == 0  # the child caught its MemoryError and lived on
    over = unreadable(results[0])
    assert over.cause is UnreadableCause.OUT_OF_MEMORY and "1,024 MB" in over.reason
    assert isinstance(results[1], DocumentText)


def test_read_in_worker_yields_every_file_in_order(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "r.pdf", [[("Intro", "Hello.")], [(None, "Page two.")]])
    paths = [pdf, tmp_path / "missing.txt", good_file(tmp_path)]
    results = list(read_in_worker(paths, limits=LIMITS))
    assert [r.path for r in results] == paths
    assert isinstance(results[0], DocumentText) and [s.page for s in results[0].sections] == [1, 2]
    assert isinstance(results[1], Unreadable)
    assert isinstance(results[2], DocumentText)
