"""The download engine against real HTTP servers on 127.0.0.1: never the internet."""

from __future__ import annotations

import errno
import random
import shutil
import socket
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.library.download import (DownloadControl, DownloadError, DownloadErrorKind,
                                  DownloadOptions, DownloadProgress, DownloadStopped, FileSpec,
                                  RemoteFacts, UnitDownload, probe)
from tests.helpers.http_servers import Served, TestServer, sha256_of

FAST = DownloadOptions(retry_delays=(0.01, 0.02, 0.04), timeout_s=5.0, chunk_size=16 * 1024,
                       space_margin=0)
MODEL = random.Random(11).randbytes(600_000)


def fetch(folder: Path, *specs: FileSpec, **kwargs: Any) -> list[Any]:
    kwargs.setdefault("options", FAST)
    return UnitDownload(list(specs), folder, **kwargs).run()


def failure(folder: Path, *specs: FileSpec, **kwargs: Any) -> DownloadError:
    with pytest.raises(DownloadError) as caught:
        fetch(folder, *specs, **kwargs)
    return caught.value


def files_in(folder: Path) -> list[str]:
    if not folder.exists():
        return []
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def hugging_face(front: TestServer, storage: TestServer, name: str, body: bytes,
                 served: bytes | None = None) -> str:
    """Put `name` on the front host as HF does: a 302 to storage with the LFS headers.

    The storage host refuses a HEAD (403), as S3 does for a URL signed for GET only.
    """
    storage.files[f"/blob/{name}"] = Served(body=body if served is None else served, head_status=403)
    front.files[f"/repo/resolve/main/{name}"] = Served(
        linked_sha256=sha256_of(body), linked_size=len(body), redirect_to=storage.url(f"/blob/{name}"))
    return front.url(f"/repo/resolve/main/{name}")


def test_a_hugging_face_download_uses_the_lfs_headers_follows_the_redirect_and_resumes(
        server: TestServer, storage: TestServer, tmp_path: Path) -> None:
    url = hugging_face(server, storage, "model.gguf", MODEL)
    (tmp_path / "model.gguf.part").write_bytes(MODEL[:100_000])  # left by an earlier run
    seen: list[DownloadProgress] = []
    [done] = fetch(tmp_path, FileSpec(url, "model.gguf"), progress=seen.append)
    assert (tmp_path / "model.gguf").read_bytes() == MODEL and files_in(tmp_path) == ["model.gguf"]
    assert done.sha256 == sha256_of(MODEL) and done.verified_sha256 and done.verified_size
    assert [e.method for e in server.log] == ["HEAD", "GET"], "HEAD first, then the body"
    assert [(e.method, e.range, e.status) for e in storage.log] == [
        ("HEAD", None, 403), ("GET", "bytes=100000-", 206)]
    assert seen[0].done >= 100_000 and seen[0].total == len(MODEL)
    assert seen[-1].done == len(MODEL), "the last report says the file is all there"
    assert probe(url, 5.0) == RemoteFacts(len(MODEL), sha256_of(MODEL))


def test_the_server_hash_catches_wrong_bytes_and_nothing_is_left(
        server: TestServer, storage: TestServer, tmp_path: Path) -> None:
    damaged = bytearray(MODEL)
    damaged[300_000] ^= 0xFF
    url = hugging_face(server, storage, "model.gguf", MODEL, served=bytes(damaged))
    error = failure(tmp_path, FileSpec(url, "model.gguf"))
    assert error.kind is DownloadErrorKind.DAMAGED
    assert str(error) == ("model.gguf arrived damaged: its SHA-256 is not the one the server gives "
                          "for it. It was deleted; download it again.")
    assert files_in(tmp_path) == []


def test_a_catalog_hash_wins_and_one_that_disagrees_with_the_server_stops_before_the_body(
        server: TestServer, storage: TestServer, tmp_path: Path) -> None:
    url = hugging_face(server, storage, "model.gguf", MODEL)
    error = failure(tmp_path, FileSpec(url, "model.gguf", sha256="ab" * 32))
    assert error.kind is DownloadErrorKind.CHANGED and "catalog may be out of date" in str(error)
    assert storage.requests("GET") == [] and files_in(tmp_path) == []
    server.files["/plain.gguf"] = Served(body=MODEL)  # states no hash: only the catalog's counts
    error = failure(tmp_path, FileSpec(server.url("/plain.gguf"), "plain.gguf", sha256="AB" * 32))
    assert "not the one the catalog gives" in str(error) and files_in(tmp_path) == []
    plain = FileSpec(server.url("/plain.gguf"), "plain.gguf", sha256=sha256_of(MODEL).upper())
    [done] = fetch(tmp_path, plain)
    assert done.verified_sha256 and (tmp_path / "plain.gguf").read_bytes() == MODEL


def test_without_any_hash_only_the_size_is_verified_and_the_result_says_so(
        server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(body=MODEL)
    [done] = fetch(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"))
    assert (done.verified_sha256, done.verified_size, done.sha256) == (False, True, sha256_of(MODEL))
    assert (tmp_path / "m.gguf").read_bytes() == MODEL


def test_a_connection_dropped_mid_body_is_retried_from_the_part(server: TestServer, tmp_path: Path) -> None:
    # Five drops and three retries: each try got further, so each one counts as the first.
    server.files["/m.gguf"] = Served(body=MODEL, linked_sha256=sha256_of(MODEL),
                                     drop_after=100_000, drops=5)
    [done] = fetch(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"))
    assert [e.range for e in server.requests("GET")] == [None] + [f"bytes={n}00000-" for n in range(1, 6)]
    assert done.verified_sha256 and (tmp_path / "m.gguf").read_bytes() == MODEL
    assert files_in(tmp_path) == ["m.gguf"]


def test_a_stalled_connection_times_out_and_resumes(server: TestServer, tmp_path: Path) -> None:
    body = MODEL[:16_384]
    server.files["/m.gguf"] = Served(body=body, slow_chunk=8192, slow_delay_s=0.6)
    options = DownloadOptions(retry_delays=(0.01,), timeout_s=0.2, stall_s=0.2, chunk_size=8192)
    [done] = fetch(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"), options=options)
    assert [e.range for e in server.requests("GET")] == [None, "bytes=8192-"]
    assert done.verified_size and (tmp_path / "m.gguf").read_bytes() == body


def test_a_server_that_ignores_range_starts_the_file_over_cleanly(
        server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(body=MODEL, linked_sha256=sha256_of(MODEL), ignore_range=True)
    (tmp_path / "m.gguf.part").write_bytes(b"x" * 50_000)
    [done] = fetch(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"))
    assert [(e.range, e.status) for e in server.requests("GET")] == [("bytes=50000-", 200)]
    assert done.size == len(MODEL) and (tmp_path / "m.gguf").read_bytes() == MODEL


def test_a_416_or_a_part_longer_than_the_file_starts_over(server: TestServer, tmp_path: Path) -> None:
    server.files["/nohead.gguf"] = Served(body=MODEL, head_status=405)  # no size until the GET
    (tmp_path / "nohead.gguf.part").write_bytes(b"x" * (len(MODEL) + 10))
    fetch(tmp_path, FileSpec(server.url("/nohead.gguf"), "nohead.gguf"))
    assert [(e.range, e.status) for e in server.requests("GET")] == [
        (f"bytes={len(MODEL) + 10}-", 416), (None, 200)]
    server.files["/sized.gguf"] = Served(body=MODEL)
    (tmp_path / "sized.gguf.part").write_bytes(b"x" * (len(MODEL) + 10))
    fetch(tmp_path, FileSpec(server.url("/sized.gguf"), "sized.gguf"))
    assert server.requests("GET", "/sized.gguf")[0].range is None
    assert (tmp_path / "nohead.gguf").read_bytes() == MODEL == (tmp_path / "sized.gguf").read_bytes()


@pytest.mark.parametrize(("status", "kind", "words"), [
    (404, DownloadErrorKind.NOT_FOUND, "There is no file at"),
    (401, DownloadErrorKind.NEEDS_LOGIN, "wants a login"),
    (403, DownloadErrorKind.REFUSED, "refused to give out"),
])
def test_a_4xx_is_final_and_names_the_url(server: TestServer, tmp_path: Path, status: int,
                                         kind: DownloadErrorKind, words: str) -> None:
    server.files["/m.gguf"] = Served(status=status)
    url = server.url("/m.gguf")
    error = failure(tmp_path, FileSpec(url, "m.gguf"))
    assert error.kind is kind and words in str(error) and url in str(error) and str(status) in str(error)
    assert len(server.log) == 1, "no retry can change a 4xx"
    assert files_in(tmp_path) == []
    # A login or a refusal ends in the way to add a file downloaded in a browser, which each
    # front end words its own way; other words have no such step to change.
    step = "add it with: kestrel models add PATH"
    if status == 404:
        assert error.words(step) == error.message
    else:
        assert error.message.endswith('download the file in a browser, then use "Import a model file…".')
        assert error.words(step) == error.message.removesuffix('use "Import a model file…".') + step + "."


def test_a_500_is_retried_then_given_up_with_a_message(server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(status=500)
    error = failure(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"))
    assert error.kind is DownloadErrorKind.SERVER and len(server.log) == len(FAST.retry_delays) + 1
    host = server.base.removeprefix("http://")
    assert str(error) == (f"The server at {host} kept failing (500 Internal Server Error) after 4 "
                          f"tries. What has arrived is kept: start the download again later to "
                          f"continue from there.")


def test_a_refused_connection_is_reported_on_the_first_try(tmp_path: Path) -> None:
    """Issue 27: nothing listening is not a network having a bad minute; after the host has
    answered once, a refusal is retried (tests/library/test_download_offline.py)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = failure(tmp_path, FileSpec(f"http://127.0.0.1:{port}/m.gguf", "m.gguf"))
    assert error.kind is DownloadErrorKind.NETWORK
    assert str(error).startswith(f"Could not reach 127.0.0.1:{port}: it refused the connection")
    assert "tries" not in str(error)


@pytest.mark.parametrize("url", ["ftp://example.org/m.gguf", "file:///etc/passwd", "m.gguf",
                                 "http://", "http://host:port/m.gguf"])
def test_only_http_and_https_urls_are_accepted(url: str, tmp_path: Path) -> None:
    error = failure(tmp_path, FileSpec(url, "m.gguf"))
    assert error.kind is DownloadErrorKind.BAD_URL and f'"{url}" is not one' in str(error)
    assert files_in(tmp_path) == []


def test_a_redirect_to_another_scheme_is_refused(server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(redirect_to="file:///etc/passwd")
    error = failure(tmp_path, FileSpec(server.url("/m.gguf"), "m.gguf"))
    assert error.kind is DownloadErrorKind.BAD_URL and files_in(tmp_path) == []


def test_a_unit_is_all_or_nothing(server: TestServer, tmp_path: Path) -> None:
    names = [f"model-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    bodies = {name: random.Random(name).randbytes(50_000 + i) for i, name in enumerate(names)}
    for name, body in bodies.items():
        server.files[f"/{name}"] = Served(body=body)
    specs = [FileSpec(server.url(f"/{name}"), f"split/{name}", sha256=sha256_of(body))
             for name, body in bodies.items()]
    wrong = [*specs[:2], FileSpec(specs[2].url, specs[2].name, sha256="0" * 64)]
    assert failure(tmp_path, *wrong).kind is DownloadErrorKind.DAMAGED
    assert files_in(tmp_path) == [f"split/{name}.part{json}" for name in list(bodies)[:2]
                                  for json in ("", ".json")], "no file in place"
    done = fetch(tmp_path, *specs)
    assert files_in(tmp_path) == [f"split/{name}" for name in bodies]
    assert [f.sha256 for f in done] == [sha256_of(body) for body in bodies.values()]
    assert len(server.requests("GET")) == 4, "the two checked parts were not fetched again"


def test_not_enough_free_space_is_refused_before_the_first_byte(
        server: TestServer, storage: TestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = hugging_face(server, storage, "m.gguf", MODEL)  # the size is X-Linked-Size's alone
    monkeypatch.setattr(shutil, "disk_usage",
                        lambda path: SimpleNamespace(total=10**9, used=10**9 - 1000, free=1000))
    target = tmp_path / "models" / "new"
    error = failure(target, FileSpec(url, "m.gguf"))
    assert error.kind is DownloadErrorKind.NO_SPACE
    assert str(error) == (f"Not enough free disk space to download m.gguf: it needs 612.0 KB (600.0 KB "
                          f"for the download, 12.0 KB kept free for the rest of the computer) and "
                          f"1.0 KB is free on the disk of {tmp_path}. Free some space and try again.")
    assert server.requests("GET") == storage.requests("GET") == [] and not target.exists()


class FillingDisk:
    """A part file whose disk fills up after `room` bytes: write raises ENOSPC."""

    def __init__(self, path: Path, room: int) -> None:
        self._file = path.open("ab")
        self._room = room

    def write(self, block: bytes) -> int:
        if self._file.tell() + len(block) > self._room:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self._file.write(block)

    def __enter__(self) -> "FillingDisk":
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()


def test_a_full_disk_mid_download_keeps_the_part_for_a_resume(server: TestServer, tmp_path: Path) -> None:
    server.files["/m.gguf"] = Served(body=MODEL, linked_sha256=sha256_of(MODEL))
    spec = FileSpec(server.url("/m.gguf"), "m.gguf")
    options = DownloadOptions(chunk_size=16 * 1024, open_part=lambda p: FillingDisk(p, 100_000))
    error = failure(tmp_path, spec, options=options)
    assert error.kind is DownloadErrorKind.DISK_FULL
    assert "free some space, then start the download again to continue" in str(error)
    part = (tmp_path / "m.gguf.part").read_bytes()
    assert 0 < len(part) <= 100_000 and MODEL.startswith(part)
    assert files_in(tmp_path) == ["m.gguf.part", "m.gguf.part.json"], "the part, and what it began from"
    [done] = fetch(tmp_path, spec)
    assert server.requests("GET")[-1].range == f"bytes={len(part)}-" and done.verified_sha256
    assert (tmp_path / "m.gguf").read_bytes() == MODEL


def slow(server: TestServer) -> FileSpec:
    server.files["/slow.gguf"] = Served(body=MODEL, linked_sha256=sha256_of(MODEL),
                                        slow_chunk=8192, slow_delay_s=0.003)
    return FileSpec(server.url("/slow.gguf"), "slow.gguf")


def start(folder: Path, spec: FileSpec, control: DownloadControl,
          pause_at: int | None = None) -> tuple[threading.Thread, dict[str, Any]]:
    """Run the download on a thread; it pauses itself once `pause_at` bytes are on disk."""
    outcome: dict[str, Any] = {"paused": threading.Event(), "progress": threading.Event(),
                               "reports": []}

    def on_progress(report: DownloadProgress) -> None:
        outcome["reports"].append(report)
        outcome["progress"].set()
        if report.paused:
            outcome["paused"].set()
        elif pause_at is not None and report.done >= pause_at and "pausing" not in outcome:
            outcome["pausing"] = report.done
            control.pause()

    def work() -> None:
        try:
            outcome["files"] = UnitDownload([spec], folder, control, on_progress, FAST).run()
        except (DownloadError, DownloadStopped) as exc:
            outcome["error"] = exc
    thread = threading.Thread(target=work)
    thread.start()
    return thread, outcome


def test_a_pause_holds_the_part_still_and_resume_goes_on_with_range(
        server: TestServer, tmp_path: Path) -> None:
    control = DownloadControl()
    thread, outcome = start(tmp_path, slow(server), control, pause_at=100_000)
    assert outcome["paused"].wait(5)
    held = (tmp_path / "slow.gguf.part").stat().st_size
    assert outcome["pausing"] <= held < len(MODEL)
    threading.Event().wait(0.3)
    assert (tmp_path / "slow.gguf.part").stat().st_size == held, "no byte arrives while paused"
    control.resume()
    thread.join(10)
    assert "error" not in outcome and (tmp_path / "slow.gguf").read_bytes() == MODEL
    assert [e.range for e in server.requests("GET")] == [None, f"bytes={held}-"]
    moving = [r for r in outcome["reports"] if r.bytes_per_second > 0 and r.seconds_left is not None]
    assert moving and all(r.total == len(MODEL) for r in outcome["reports"])
    assert outcome["reports"][-1].done == len(MODEL)


@pytest.mark.parametrize("while_paused", [False, True])
def test_cancel_deletes_the_part(server: TestServer, tmp_path: Path, while_paused: bool) -> None:
    control = DownloadControl()
    thread, outcome = start(tmp_path, slow(server), control, pause_at=50_000 if while_paused else None)
    assert (outcome["paused"] if while_paused else outcome["progress"]).wait(5)
    assert (tmp_path / "slow.gguf.part").exists()
    control.cancel()
    thread.join(10)
    assert isinstance(outcome["error"], DownloadStopped) and outcome["error"].cancelled
    assert str(outcome["error"]) == "Download of slow.gguf cancelled; what had arrived was deleted."
    assert files_in(tmp_path) == []


def test_a_pause_survives_a_restart(server: TestServer, tmp_path: Path) -> None:
    control = DownloadControl()
    thread, outcome = start(tmp_path, slow(server), control, pause_at=100_000)
    assert outcome["paused"].wait(5)
    control.stop()  # the app closes while paused
    thread.join(10)
    assert isinstance(outcome["error"], DownloadStopped) and not outcome["error"].cancelled
    kept = (tmp_path / "slow.gguf.part").read_bytes()
    assert len(kept) >= 100_000 and MODEL.startswith(kept)
    [done] = UnitDownload([slow(server)], tmp_path, options=FAST).run()  # a new app, a new download
    assert server.requests("GET")[-1].range == f"bytes={len(kept)}-"
    assert done.verified_sha256 and (tmp_path / "slow.gguf").read_bytes() == MODEL
