"""Which download failures are final and which are tried again (issue 27): a host that cannot be
reached is said on the first try; only what can pass (drops, 5xx, 429) is retried, bounded.

Real sockets on 127.0.0.1 and a real name lookup of a `.invalid` name (RFC 6761: it never
resolves); the time to the error is measured in benchmarks/offline_downloads.py, not here.
"""

from __future__ import annotations

import socket
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest

from app.library.download import (DownloadControl, DownloadError, DownloadErrorKind, DownloadOptions,
                                  FileSpec, UnitDownload)
from app.library.download.transport import retry_after
from app.library.huggingface.hub import units_for

FAST = DownloadOptions(retry_delays=(0.01, 0.02, 0.04), timeout_s=5.0, lookup_s=2.5, space_margin=0)
BODY = b"GGUF" + bytes(996)


class Scripted:
    """A server on 127.0.0.1 that answers each connection with the next canned response, then
    stops listening once they are all given: a later connection is refused."""

    def __init__(self, responses: list[bytes]) -> None:
        self.requests: list[str] = []
        self._responses = list(responses)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/m.gguf"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while self._responses:
            connection, _ = self._listener.accept()
            response = self._responses.pop(0)
            if not self._responses:
                self._listener.close()  # before answering: the next try finds nothing listening
            with connection:
                self.requests.append(connection.recv(65536).split(b"\r\n", 1)[0].decode())
                connection.sendall(response)

    def close(self) -> None:
        self._listener.close()


def answer(status: str, body: bytes = b"", headers: str = "", length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return (f"HTTP/1.1 {status}\r\nContent-Length: {size}\r\nConnection: close\r\n{headers}\r\n"
            .encode() + body)


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every name looked up (the real resolver answers)."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def counting(host: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(str(host))
        return real(host, *args, **kwargs)
    monkeypatch.setattr(socket, "getaddrinfo", counting)
    yield asked


class RecordedWaits(DownloadControl):
    """A control whose waits before a retry are written down, not slept."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def failure(tmp_path: Path, url: str, **kwargs: Any) -> DownloadError:
    kwargs.setdefault("options", FAST)
    with pytest.raises(DownloadError) as caught:
        UnitDownload([FileSpec(url, "m.gguf")], tmp_path, **kwargs).run()
    return caught.value


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_name_that_does_not_resolve_is_final_on_the_first_try(tmp_path: Path, lookups: list[str]) -> None:
    steps: list[str] = []
    error = failure(tmp_path, "https://nonexistent.invalid/m.gguf", steps=steps.append)
    assert lookups == ["nonexistent.invalid"], "a lookup that failed is not tried again"
    assert error.kind is DownloadErrorKind.NETWORK
    assert str(error).startswith("Could not reach nonexistent.invalid: no network connection? ")
    assert "Check that this computer is online" in str(error)
    assert steps == ["Looking up nonexistent.invalid…"]
    assert not any(tmp_path.rglob("*.part"))


def test_a_closed_port_is_final_on_the_first_try(tmp_path: Path) -> None:
    port = closed_port()
    control = RecordedWaits()
    error = failure(tmp_path, f"http://127.0.0.1:{port}/m.gguf", control=control)
    assert control.waits == [], "no retry for a refused connection before the host ever answered"
    assert error.kind is DownloadErrorKind.NETWORK
    assert str(error) == (f"Could not reach 127.0.0.1:{port}: it refused the connection: nothing is "
                          f"listening there, or a firewall or proxy said no. Check the address (and "
                          f"that the server is running), then try again.")


def test_a_part_from_an_earlier_run_is_said_to_be_kept(tmp_path: Path) -> None:
    (tmp_path / "m.gguf.part").write_bytes(BODY[:100])
    error = failure(tmp_path, f"http://127.0.0.1:{closed_port()}/m.gguf")
    assert "What had arrived before is kept" in str(error)
    assert (tmp_path / "m.gguf.part").read_bytes() == BODY[:100]


def test_a_lookup_with_no_answer_is_cut_at_its_time_and_final(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    released = threading.Event()
    asked: list[str] = []

    def silent(host: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(str(host))
        released.wait(30)  # a resolver with no network behind it
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    monkeypatch.setattr(socket, "getaddrinfo", silent)
    try:
        error = failure(tmp_path, "https://slow.invalid/m.gguf",
                        options=DownloadOptions(retry_delays=(0.01,), lookup_s=0.2, space_margin=0))
    finally:
        released.set()
    assert asked == ["slow.invalid"]
    assert str(error).startswith("Could not reach slow.invalid: no network connection? Looking up its "
                                 "name got no answer in time.")


def test_a_host_that_answered_then_refuses_is_retried_as_a_drop(tmp_path: Path) -> None:
    server = Scripted([answer("200 OK", length=len(BODY))])  # the HEAD; then it is gone
    control = RecordedWaits()
    error = failure(tmp_path, server.url, control=control)
    assert server.requests == ["HEAD /m.gguf HTTP/1.1"]
    assert control.waits == list(FAST.retry_delays), "the budget's waits, no more"
    assert error.kind is DownloadErrorKind.NETWORK
    assert "the connection was refused (4 tries)" in str(error) and "Check the network" in str(error)


def test_a_429_waits_what_retry_after_asks_then_goes_on(tmp_path: Path) -> None:
    server = Scripted([answer("429 Too Many Requests", headers="Retry-After: 7\r\n"),
                       answer("200 OK", length=len(BODY)), answer("200 OK", BODY)])
    control = RecordedWaits()
    [done] = UnitDownload([FileSpec(server.url, "m.gguf")], tmp_path, control, options=FAST).run()
    assert control.waits == [7.0] and done.path.read_bytes() == BODY
    assert [r.split()[0] for r in server.requests] == ["HEAD", "HEAD", "GET"]


def test_a_429_that_asks_for_longer_than_kestrel_waits_is_final(tmp_path: Path) -> None:
    server = Scripted([answer("429 Too Many Requests", headers="Retry-After: 3600\r\n")])
    control = RecordedWaits()
    error = failure(tmp_path, server.url, control=control)
    assert control.waits == [] and len(server.requests) == 1
    assert error.kind is DownloadErrorKind.SERVER
    assert "asks Kestrel to wait about 60 minutes" in str(error) and "429 Too Many Requests" in str(error)


def test_a_503_is_retried_within_the_budget(tmp_path: Path) -> None:
    server = Scripted([answer("503 Service Unavailable"), answer("200 OK", length=len(BODY)),
                       answer("200 OK", BODY)])
    control = RecordedWaits()
    UnitDownload([FileSpec(server.url, "m.gguf")], tmp_path, control, options=FAST).run()
    assert control.waits == [FAST.retry_delays[0]] and len(server.requests) == 3


def test_the_steps_before_the_first_byte_are_said(tmp_path: Path) -> None:
    server = Scripted([answer("200 OK", length=len(BODY)), answer("200 OK", BODY)])
    steps: list[str] = []
    url = server.url.replace("127.0.0.1", "localhost")
    UnitDownload([FileSpec(url, "m.gguf")], tmp_path, options=FAST, steps=steps.append).run()
    host = url.split("/")[2]
    assert steps == ["Looking up localhost…", f"Connecting to {host}…", f"Waiting for {host} to answer…"] * 2


def test_a_repository_listing_from_an_unreachable_host_says_so_at_once(lookups: list[str]) -> None:
    with pytest.raises(DownloadError) as caught:
        units_for("owner/model", endpoint="https://nonexistent.invalid")
    assert lookups == ["nonexistent.invalid"]
    assert str(caught.value).startswith("Could not reach nonexistent.invalid: no network connection?")


def test_retry_after_reads_seconds_and_dates() -> None:
    now = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert retry_after("120") == 120.0
    assert retry_after("Tue, 01 Dec 2026 12:01:30 GMT", now) == 90.0
    assert retry_after("Tue, 01 Dec 2026 11:00:00 GMT", now) == 0.0
    assert retry_after("soon") is None and retry_after(None) is None
