"""The download engine against servers that lie, stall, change the file and never stop
(issue 28): every one ends in bounded tries and time, in words, and never splices."""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.library.download import (DownloadControl, DownloadError, DownloadErrorKind,
                                  DownloadOptions, DownloadStopped, FileSpec, UnitDownload)
from app.library.download import nofollow
from app.library.download.nofollow import NotOurFile
from app.library.download.part import open_for_append
from tests.helpers.http_servers import Served, TestServer, sha256_of
from tests.library.conftest import Counting

FAST = DownloadOptions(retry_delays=(0.01, 0.02, 0.04), timeout_s=2.0, stall_s=2.0,
                       chunk_size=16 * 1024, space_margin=0)
MODEL = random.Random(28).randbytes(600_000)
NEW_MODEL = random.Random(29).randbytes(600_000)
BOUND_S = 20.0  # a case still running after this has hung: it is cancelled and fails


def bounded(folder: Path, *specs: FileSpec, options: DownloadOptions = FAST) -> tuple[Any, float]:
    """Run the download on a thread; what it returned or raised, and how long it took.

    A download that runs past BOUND_S is cancelled, so a test of a hang fails rather
    than hangs.
    """
    control = DownloadControl()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["value"] = UnitDownload(list(specs), folder, control, options=options).run()
        except BaseException as exc:  # handed to the test, which asserts on it
            outcome["value"] = exc
    started = time.monotonic()
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(BOUND_S)
    if thread.is_alive():
        control.cancel()
        thread.join(10)
        pytest.fail(f"the download was still running after {BOUND_S:.0f} s: {outcome}")
    return outcome["value"], time.monotonic() - started


def failed(folder: Path, *specs: FileSpec, options: DownloadOptions = FAST) -> DownloadError:
    value, _ = bounded(folder, *specs, options=options)
    assert isinstance(value, DownloadError), value
    return value


# --- item 2: the part is opened without following links ---------------------------------------


def test_a_part_that_is_a_symlink_is_removed_and_its_target_never_written(
        server: TestServer, tmp_path: Path) -> None:
    folder, other = tmp_path / "model", tmp_path / "someone else's.txt"
    other.write_bytes(b"k" * 1221)
    folder.mkdir()
    (folder / "m.gguf.part").symlink_to(other)
    server.files["/m.gguf"] = Served(body=MODEL, linked_sha256=sha256_of(MODEL))

    [done], _ = bounded(folder, FileSpec(server.url("/m.gguf"), "m.gguf"))

    assert other.read_bytes() == b"k" * 1221, "the link's target was written through"
    assert done.verified_sha256 and (folder / "m.gguf").read_bytes() == MODEL
    assert not (folder / "m.gguf").is_symlink()
    assert [e.range for e in server.requests("GET")] == [None], "the download started over"


def test_a_part_hard_linked_to_another_file_is_not_appended_to(server: TestServer, tmp_path: Path) -> None:
    folder, other = tmp_path / "model", tmp_path / "notes.txt"
    other.write_bytes(b"n" * 5000)
    folder.mkdir()
    (folder / "m.gguf.part").hardlink_to(other)
    server.files["/m.gguf"] = Served(body=MODEL)

    [done], _ = bounded(folder, FileSpec(server.url("/m.gguf"), "m.gguf"))

    assert other.read_bytes() == b"n" * 5000 and (folder / "m.gguf").read_bytes() == MODEL


def test_a_fifo_at_the_part_is_removed_rather_than_waited_on(server: TestServer, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    fifo = folder / "m.gguf.part"
    os.mkfifo(fifo)
    server.files["/m.gguf"] = Served(body=MODEL)
    try:
        [done], seconds = bounded(folder, FileSpec(server.url("/m.gguf"), "m.gguf"))
    finally:
        if fifo.exists() and not fifo.is_file():  # unblock a writer the old code left waiting
            with open(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK), "rb"):
                pass
    assert (folder / "m.gguf").read_bytes() == MODEL and seconds < 5


def test_a_folder_at_the_part_is_refused_in_words_and_kept(server: TestServer, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    (folder / "m.gguf.part").mkdir(parents=True)
    (folder / "m.gguf.part" / "mine.txt").write_text("keep me")
    server.files["/m.gguf"] = Served(body=MODEL)

    error = failed(folder, FileSpec(server.url("/m.gguf"), "m.gguf"))

    assert error.kind is DownloadErrorKind.DISK_ERROR
    assert "is a folder" in str(error) and "Move it elsewhere" in str(error)
    assert (folder / "m.gguf.part" / "mine.txt").read_text() == "keep me"


def test_a_subfolder_of_the_unit_that_is_a_symlink_is_not_written_through(
        server: TestServer, tmp_path: Path) -> None:
    folder, elsewhere = tmp_path / "model", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    (folder / "int4").symlink_to(elsewhere, target_is_directory=True)
    server.files["/m.onnx"] = Served(body=MODEL)

    error = failed(folder, FileSpec(server.url("/m.onnx"), "int4/m.onnx"))

    assert error.kind is DownloadErrorKind.DISK_ERROR and "int4" in str(error)
    assert list(elsewhere.iterdir()) == []


def test_the_default_opener_does_not_follow_a_link(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"t")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(OSError):
        open_for_append(tmp_path / "link").close()
    assert target.read_bytes() == b"t"


@pytest.mark.parametrize("planted", ["symlink", "fifo", "folder"])
def test_the_windows_way_refuses_what_is_not_a_regular_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str) -> None:
    """Windows has no O_NOFOLLOW: its branch (an lstat check, then the open) runs here with
    the platform switched, on what this machine can plant."""
    monkeypatch.setattr(nofollow, "_WINDOWS", True)
    target, part = tmp_path / "target", tmp_path / "m.gguf.part"
    target.write_bytes(b"t")
    if planted == "symlink":
        part.symlink_to(target)
    elif planted == "fifo":
        os.mkfifo(part)
    else:
        part.mkdir()
    with pytest.raises(NotOurFile):
        open_for_append(part).close()
    assert target.read_bytes() == b"t"
    with open_for_append(tmp_path / "new.part") as fresh:
        fresh.write(b"ok")
    assert (tmp_path / "new.part").read_bytes() == b"ok"


# --- item 3: bounded tries and time ----------------------------------------------------------


def test_a_server_that_says_more_than_it_sends_and_ignores_range_is_given_up_on(
        server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(body=MODEL[:300_000], stated_length=len(MODEL), ignore_range=True)

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"))

    gets = server.requests("GET")
    # The first try got 300 KB further than nothing; every later one the same 300 KB again.
    assert len(gets) == 1 + len(FAST.retry_delays) + 1, "the same bytes again counted as progress"
    assert all(e.status == 200 for e in gets) and error.kind is DownloadErrorKind.SERVER
    assert "after 5 tries" in str(error)
    assert "ended" in str(error) and "300.0 KB of the 600.0 KB" in str(error)


def test_a_server_that_honours_range_but_has_less_than_it_said_fails_at_once(
        server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(body=MODEL[:300_000], stated_length=len(MODEL))

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"))

    assert [(e.range, e.status) for e in server.requests("GET")] == [(None, 200), ("bytes=300000-", 416)]
    assert error.kind is DownloadErrorKind.DAMAGED
    assert "said it is 600.0 KB but has only 300.0 KB" in str(error)
    assert list(tmp_path.iterdir()) == []


def test_a_server_that_sends_a_kilobyte_then_stalls_is_given_up_on(server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(body=MODEL, stall_after=1024, stall_s=5.0)
    options = DownloadOptions(retry_delays=(0.01, 0.01), timeout_s=2.0, stall_s=0.3, space_margin=0)

    error, seconds = bounded(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options)

    assert isinstance(error, DownloadError) and error.kind is DownloadErrorKind.NETWORK
    assert "nothing arrived for 0.3 s" in str(error) and "(3 tries)" in str(error)
    assert [e.range for e in server.requests("GET")] == [None, "bytes=1024-", "bytes=2048-"]
    assert seconds < 3 * 0.3 + 2, "each stall is one try of stall_s"


def test_a_trickle_counts_as_a_stall(server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(body=MODEL, slow_chunk=100, slow_delay_s=0.05)  # 2 KB/s
    options = DownloadOptions(retry_delays=(0.01,), timeout_s=2.0, stall_s=0.5, stall_bytes=16 * 1024,
                              space_margin=0)

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options)

    assert "almost nothing arrived" in str(error) and "(2 tries)" in str(error)


def test_a_head_that_never_answers_is_bounded_by_the_first_byte_time(
        server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(body=MODEL, head_delay_s=30.0)
    options = DownloadOptions(retry_delays=(0.01,), timeout_s=0.3, space_margin=0)

    error, seconds = bounded(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options)

    assert isinstance(error, DownloadError) and "did not answer within 0.3 s (2 tries)" in str(error)
    assert seconds < 2 * 0.3 + 2


def test_headers_that_trickle_forever_are_cut_at_the_first_byte_time(
        server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(trickle_headers=True)
    options = DownloadOptions(retry_delays=(0.01,), timeout_s=0.5, space_margin=0)

    error, seconds = bounded(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options)

    assert isinstance(error, DownloadError) and error.kind is DownloadErrorKind.NETWORK
    assert seconds < 2 * 0.5 + 2


def test_drops_after_real_progress_go_on_but_not_past_the_tries_in_all(
        server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(body=MODEL, drop_after=20_000, drops=100)
    options = DownloadOptions(retry_delays=(0.01,), timeout_s=2.0, progress_bytes=10_000, tries_in_all=6,
                              space_margin=0)

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options)

    assert len(server.requests("GET")) == 6 and "after 6 tries" in str(error)
    assert (tmp_path / "m.gguf.part").stat().st_size == 6 * 20_000, "what arrived is kept"


def test_retries_stop_once_the_files_time_is_spent(server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(body=MODEL, drop_after=20_000, drops=100, slow_chunk=10_000,
                                     slow_delay_s=0.1)
    options = DownloadOptions(retry_delays=(0.01,), timeout_s=2.0, progress_bytes=10_000, tries_in_all=100,
                              time_s=0.5, slowest_bytes_per_s=10**12, space_margin=0)

    error, seconds = bounded(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options)

    assert isinstance(error, DownloadError) and seconds < 3
    assert len(server.requests("GET")) < 10


def test_the_default_budgets_end_a_silent_or_stalling_server_within_minutes() -> None:
    options = DownloadOptions()
    tries = len(options.retry_delays) + 1
    silent = tries * options.timeout_s + sum(options.retry_delays)  # the headers never come
    stalled = tries * (options.timeout_s + options.stall_s) + sum(options.retry_delays)  # late, then a KB
    assert silent <= 90 and stalled <= 150


# --- item 4: a changed file restarts from zero --------------------------------------------------


def interrupted(server: TestServer, folder: Path, served: Served) -> FileSpec:
    """A first download that stopped at 40 %: its part, and the server's answers so far."""
    served.drop_after, served.drops = 240_000, 1
    server.files["/m.gguf"] = served
    spec = FileSpec(server.url("/m.gguf"), "m.gguf")
    failed(folder, spec, options=DownloadOptions(retry_delays=(), timeout_s=2.0, space_margin=0))
    assert (folder / "m.gguf.part").stat().st_size == 240_000
    return spec


@pytest.mark.parametrize("honour_if_range", [False, True])
def test_a_file_whose_etag_changed_starts_over_and_is_never_spliced(
        server: TestServer, tmp_path: Path, honour_if_range: bool) -> None:
    spec = interrupted(server, tmp_path, Served(body=MODEL, etag='"v1"', honour_if_range=honour_if_range))
    server.files["/m.gguf"] = Served(body=NEW_MODEL, etag='"v2"', honour_if_range=honour_if_range)

    [done], _ = bounded(tmp_path, spec)

    assert (tmp_path / "m.gguf").read_bytes() == NEW_MODEL, "version 1's start spliced onto version 2"
    resume = server.requests("GET")[1]
    assert (resume.range, resume.if_range) == ("bytes=240000-", '"v1"')
    assert list(tmp_path.iterdir()) == [tmp_path / "m.gguf"], "nothing is left beside the file"


def test_an_unchanged_file_resumes_with_if_range(server: TestServer, tmp_path: Path) -> None:
    spec = interrupted(server, tmp_path, Served(body=MODEL, etag='"v1"', honour_if_range=True))
    server.files["/m.gguf"].drops = 0

    bounded(tmp_path, spec)

    resume = server.requests("GET")[1]
    assert (resume.range, resume.if_range, resume.status) == ("bytes=240000-", '"v1"', 206)
    assert (tmp_path / "m.gguf").read_bytes() == MODEL


def test_last_modified_is_the_validator_when_there_is_no_etag(server: TestServer, tmp_path: Path) -> None:
    first = "Tue, 01 Apr 2025 10:00:00 GMT"
    spec = interrupted(server, tmp_path, Served(body=MODEL, last_modified=first))
    server.files["/m.gguf"] = Served(body=NEW_MODEL, last_modified="Wed, 02 Apr 2025 10:00:00 GMT")

    bounded(tmp_path, spec)

    assert server.requests("GET")[1].if_range == first
    assert (tmp_path / "m.gguf").read_bytes() == NEW_MODEL


def test_a_weak_etag_is_no_validator(server: TestServer, tmp_path: Path) -> None:
    spec = interrupted(server, tmp_path, Served(body=MODEL, etag='W/"v1"'))
    server.files["/m.gguf"].drops = 0

    bounded(tmp_path, spec)

    assert server.requests("GET")[1].if_range is None and (tmp_path / "m.gguf").read_bytes() == MODEL


def test_the_sha256_in_a_plain_etag_is_checked_without_a_catalog(server: TestServer, tmp_path: Path) -> None:
    damaged = bytearray(MODEL)
    damaged[500_000] ^= 1
    server.files["/m.gguf"] = Served(body=bytes(damaged), etag=f'"{sha256_of(MODEL)}"')

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"))

    assert error.kind is DownloadErrorKind.DAMAGED and "SHA-256 is not the one the server gives" in str(error)
    server.files["/m.gguf"] = Served(body=MODEL, etag=f'"{sha256_of(MODEL)}"', head_status=405)
    [done], _ = bounded(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"))
    assert done.verified_sha256, "the GET's ETag states it when the HEAD is refused"


# --- item 5: never more than the stated size ----------------------------------------------------




def test_a_body_longer_than_stated_stops_at_the_stated_size(
        server: TestServer, tmp_path: Path, counting: type[Counting]) -> None:
    server.files["/m.gguf"] = Served(body=MODEL, linked_size=len(MODEL), stated_length=len(MODEL) + 3_000_000,
                                     extra=3_000_000)
    options = DownloadOptions(retry_delays=(0.01,), timeout_s=2.0, space_margin=0, open_part=counting)

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options)

    assert error.kind is DownloadErrorKind.DAMAGED and "more than the 600.0 KB" in str(error)
    assert counting.written <= len(MODEL) and list(tmp_path.iterdir()) == []


def test_an_endless_body_stops_at_the_catalog_size(
        server: TestServer, tmp_path: Path, counting: type[Counting]) -> None:
    server.files["/m.gguf"] = Served(body=MODEL, endless=True, head_status=405)
    options = DownloadOptions(retry_delays=(0.01,), timeout_s=2.0, space_margin=0, open_part=counting)

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf", size=len(MODEL)), options=options)

    assert error.kind is DownloadErrorKind.DAMAGED and counting.written <= len(MODEL)


def test_an_endless_body_with_no_size_stated_stops_at_the_cap(
        server: TestServer, tmp_path: Path, counting: type[Counting]) -> None:
    server.files["/m.gguf"] = Served(body=MODEL, endless=True, head_status=405)
    options = DownloadOptions(retry_delays=(0.01,), timeout_s=2.0, space_margin=0, open_part=counting,
                              unstated_cap=2_000_000)

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options)

    assert error.kind is DownloadErrorKind.DAMAGED and "without saying how big" in str(error)
    assert counting.written <= 2_000_000 and list(tmp_path.iterdir()) == []


# --- item 9: the room kept free scales with the file --------------------------------------------


def test_a_small_file_fits_on_a_small_disk(server: TestServer, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    server.files["/m.gguf"] = Served(body=MODEL[::1] + MODEL[:139_000])  # 739 KB
    monkeypatch.setattr(shutil, "disk_usage",
                        lambda path: SimpleNamespace(total=20 * 10**6, used=0, free=20 * 10**6))

    value, _ = bounded(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=DownloadOptions(
        retry_delays=(0.01,), timeout_s=2.0))

    assert not isinstance(value, BaseException), value


def test_a_big_file_keeps_a_share_of_itself_free(server: TestServer, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    size = 10 * 10**9
    server.files["/m.gguf"] = Served(linked_size=size, linked_sha256="0" * 64, status=None)
    monkeypatch.setattr(shutil, "disk_usage",
                        lambda path: SimpleNamespace(total=10**12, used=0, free=size + 100 * 10**6))

    error = failed(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=DownloadOptions(
        retry_delays=(0.01,), timeout_s=2.0))

    assert error.kind is DownloadErrorKind.NO_SPACE and "10.2 GB" in str(error)
    assert server.requests("GET") == []


def test_a_cancel_during_a_retry_wait_still_ends_at_once(server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(status=503)
    control = DownloadControl()
    options = DownloadOptions(retry_delays=(30.0,), timeout_s=2.0, space_margin=0)
    outcome: list[BaseException] = []

    def work() -> None:
        try:
            UnitDownload([FileSpec(server.url("/m.gguf"), "m.gguf")], tmp_path, control, options=options).run()
        except BaseException as exc:  # asserted below
            outcome.append(exc)
    thread = threading.Thread(target=work)
    thread.start()
    time.sleep(0.3)
    control.cancel()
    thread.join(5)
    assert isinstance(outcome[0], DownloadStopped)
