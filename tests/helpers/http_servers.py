"""Real HTTP servers on 127.0.0.1 for download tests, each file with its own misbehaviour.

A test server is a ThreadingHTTPServer on port 0 in a thread of the test. Every request
is logged (method, path, Range header, status), so a test can assert that a download
resumed where it should, retried as often as it should, or did not fetch at all.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator
from urllib.parse import quote

_RANGE = re.compile(r"^bytes=(\d+)-$")


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Served:
    """One path of a test server: its bytes and how the server behaves for it.

    linked_sha256 / linked_size go out as Hugging Face's X-Linked-Etag / X-Linked-Size;
    redirect_to answers 302 to that URL (HF's storage host), with those headers.
    head_status answers a HEAD with that status (405: no HEAD; 403: a URL signed for GET).
    drop_after cuts the body after that many bytes on the first `drops` GETs.

    The hostile ones: etag / last_modified go out on every answer, and honour_if_range
    answers a Range whose If-Range does not match them with the whole file (200), as
    RFC 9110 says; without it a Range is honoured whatever If-Range says (a naive server).
    stated_length is the Content-Length sent whatever the body is (a lie); stall_after
    sends that many bytes of the body, then nothing for stall_s; extra sends that many
    bytes more than the body (and than Content-Length says); endless sends no
    Content-Length and repeats the body until the client hangs up; head_delay_s answers a
    HEAD only after that long; trickle_headers sends the status line, then one header byte
    every 0.05 s, never ending the headers. chunked sends an endless body in chunked
    transfer coding (HTTP/1.1) instead of until the connection closes; endless_limit ends an
    endless body after about that many bytes, a net for a test whose download might not stop
    by itself.
    """

    body: bytes = b""
    linked_sha256: str | None = None
    linked_size: int | None = None
    redirect_to: str | None = None
    status: int | None = None
    head_status: int | None = None
    ignore_range: bool = False
    drop_after: int | None = None
    drops: int = 0
    slow_chunk: int = 0
    slow_delay_s: float = 0.0
    etag: str | None = None
    last_modified: str | None = None
    honour_if_range: bool = False
    stated_length: int | None = None
    stall_after: int | None = None
    stall_s: float = 30.0
    extra: int = 0
    endless: bool = False
    head_delay_s: float = 0.0
    trickle_headers: bool = False
    chunked: bool = False
    endless_limit: int | None = None


@dataclass(frozen=True)
class Logged:
    method: str
    path: str
    range: str | None
    status: int
    if_range: str | None = None


@dataclass
class TestServer:
    """The files a server gives out, keyed by path, and every request it answered."""

    __test__ = False  # not a pytest test class
    files: dict[str, Served] = field(default_factory=dict)
    log: list[Logged] = field(default_factory=list)
    base: str = ""

    def url(self, path: str) -> str:
        return self.base + path

    def requests(self, method: str | None = None, path: str | None = None) -> list[Logged]:
        return [entry for entry in list(self.log)
                if (method is None or entry.method == method) and (path is None or entry.path == path)]


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def log_message(self, format: str, *args: object) -> None:
        """Override BaseHTTPRequestHandler.log_message: the test's log is enough."""

    def _answer(self, head: bool) -> None:
        served = self.server.state.files.get(self.path)
        status = self._status(served, head)
        self.server.state.log.append(Logged(self.command, self.path, self.headers.get("Range"), status,
                                            self.headers.get("If-Range")))
        try:
            if served is not None and head and served.head_delay_s:
                time.sleep(served.head_delay_s)
            if served is not None and served.trickle_headers:
                self._trickle()
                return
            self._send(served, status, head)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up: a pause or a cancel, as the test meant

    def _status(self, served: Served | None, head: bool) -> int:
        if served is None:
            return 404
        if served.status is not None:
            return served.status
        if served.redirect_to:
            return 302
        if head and served.head_status is not None:
            return served.head_status
        wanted = _RANGE.match(self.headers.get("Range") or "")
        if head or wanted is None or served.ignore_range or not self._if_range_holds(served):
            return 200
        return 206 if int(wanted.group(1)) < len(served.body) else 416

    def _if_range_holds(self, served: Served) -> bool:
        given = self.headers.get("If-Range")
        return not served.honour_if_range or given is None or given in (served.etag, served.last_modified)

    def _trickle(self) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for _ in range(2000):  # 100 s at most: a test that waits this long has failed anyway
            self.wfile.write(b"X")
            self.wfile.flush()
            time.sleep(0.05)

    def _send(self, served: Served | None, status: int, head: bool) -> None:
        if served is not None and served.chunked:
            self.protocol_version = "HTTP/1.1"  # chunked coding is HTTP/1.1's; this answer alone
        if served is None or (status >= 400 and status != 416):
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(status)
        self._linked_headers(served)
        if status == 302:
            self.send_header("Location", served.redirect_to or "")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start = self._start(served, status)
        if served.etag is not None:
            self.send_header("ETag", served.etag)
        if served.last_modified is not None:
            self.send_header("Last-Modified", served.last_modified)
        if served.endless and status in (200, 206) and not head:
            self.send_header("Connection", "close")
            if served.chunked:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if served.chunked or served.endless_limit is not None:
                self._endless_of(served, served.body[start:] or b"x")
            else:
                self._endless(served.body[start:] or b"x")
            return
        length = len(served.body) - start if status != 416 else 0
        if served.stated_length is not None and status in (200, 206):
            length = served.stated_length - start
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if not head and status in (200, 206):
            self._body(served, served.body[start:] + bytes(served.extra))

    def _linked_headers(self, served: Served) -> None:
        if served.linked_sha256 is not None:
            self.send_header("X-Linked-Etag", f'"{served.linked_sha256}"')
        if served.linked_size is not None:
            self.send_header("X-Linked-Size", str(served.linked_size))

    def _start(self, served: Served, status: int) -> int:
        if status == 416:
            self.send_header("Content-Range", f"bytes */{len(served.body)}")
            return len(served.body)
        if status != 206:
            return 0
        start = int(_RANGE.match(self.headers["Range"]).group(1))  # type: ignore[union-attr]
        self.send_header("Content-Range", f"bytes {start}-{len(served.body) - 1}/{len(served.body)}")
        return start

    def _endless(self, body: bytes) -> None:
        self.close_connection = True
        for _ in range(100_000):  # gigabytes: far past any cap a test sets
            self.wfile.write(body)

    def _endless_of(self, served: Served, body: bytes) -> None:
        """An endless body as served says: in chunks, or cut at endless_limit."""
        self.close_connection = True
        sent, limit = 0, served.endless_limit if served.endless_limit is not None else 1 << 62
        while sent < limit:
            piece = body[:limit - sent]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if served.chunked else piece)
            sent += len(piece)
        if served.chunked:
            self.wfile.write(b"0\r\n\r\n")

    def _body(self, served: Served, body: bytes) -> None:
        if served.stall_after is not None:
            self.wfile.write(body[:served.stall_after])
            self.wfile.flush()
            time.sleep(served.stall_s)
            self.close_connection = True
            return
        if served.drops > 0 and served.drop_after is not None:
            served.drops -= 1
            body, self.close_connection = body[:served.drop_after], True
        step = served.slow_chunk or len(body) or 1
        for at in range(0, len(body), step):
            self.wfile.write(body[at:at + step])
            if served.slow_delay_s:
                self.wfile.flush()
                time.sleep(served.slow_delay_s)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    state: TestServer

    def handle_error(self, request: object, client_address: object) -> None:
        """Override socketserver's handle_error: a hung-up client is part of these tests."""


@contextmanager
def running_server() -> Iterator[TestServer]:
    """A TestServer listening on 127.0.0.1 (a free port) for the length of the block."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = TestServer(base=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def hugging_face_repo(front: TestServer, storage: TestServer, repo: str, files: dict[str, bytes],
                      revision: str = "main", served: dict[str, bytes] | None = None,
                      listed_sha256: bool = True) -> str:
    """Serve `repo` on front as Hugging Face does; the endpoint to give the lister.

    GET /api/models/{repo}?blobs=true lists the files (rfilename, size, lfs.sha256);
    /{repo}/resolve/{revision}/{path} answers 302 to the storage host with X-Linked-Etag
    and X-Linked-Size; storage serves Range and refuses HEAD (403), as S3 does for a URL
    signed for GET. served gives other bytes for a path (a damaged copy on storage).
    """
    siblings = []
    for path, body in files.items():
        blob = f"/blobs/{sha256_of(path.encode())}"
        storage.files[blob] = Served(body=(served or {}).get(path, body), head_status=403)
        front.files[f"/{repo}/resolve/{quote(revision, safe='')}/{quote(path)}"] = Served(
            linked_sha256=sha256_of(body), linked_size=len(body), redirect_to=storage.url(blob))
        lfs = {"sha256": sha256_of(body), "size": len(body), "pointerSize": 134} if listed_sha256 else None
        siblings.append({"rfilename": path, "size": len(body), "blobId": "f" * 40,
                         **({"lfs": lfs} if lfs else {})})
    listing = {"id": repo, "sha": "a" * 40, "siblings": siblings}
    at = "" if revision == "main" else f"/revision/{quote(revision, safe='')}"
    front.files[f"/api/models/{repo}{at}?blobs=true"] = Served(body=json.dumps(listing).encode())
    return front.base
