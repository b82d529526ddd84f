"""The robustness campaign's hostile download server (issue 28): `python -m app models get`
against a server on 127.0.0.1 that lies about sizes, ignores Range, stalls, never answers,
changes the file between tries, sends more than it said or never stops; against a `.part`
that was replaced by a link; and against hostile Hugging Face listings (HF_ENDPOINT).

Each case checks the exit status, a last message in plain words, a wall time within the
budget the download constants give that server (budget.py), and that nothing outside the
model's folder was written (every file of the case's folder outside <home>/data/models is
compared before and after, the link's target included). An endless body with no size
stated anywhere is not a case here: its cap is the disk's free room (a unit test covers it
with a small cap). The sample runs only cases that end within seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from benchmarks.robustness_kit import (PYTHON, Case, Context, Finished, _short, app_env, check_finished,
                                       check_plain_message, run)

CATEGORY = "hostile-download"
SLACK_S = 10.0  # starting Python and the app, on two busy cores, beyond what the budget allows
_HOLD_S = 600.0  # how long a stalled or silent answer keeps its connection open at most


@dataclass
class Served:
    """The versions the server gives out and what it saw: each request's method, path,
    Range and If-Range."""

    v1: bytes
    v2: bytes
    log: list[tuple[str, str, str | None, str | None]] = field(default_factory=list)
    gets: dict[str, int] = field(default_factory=dict)
    listings: dict[str, bytes] = field(default_factory=dict)


class _Hostile(BaseHTTPRequestHandler):
    """One misbehaviour per path: /<mode>/tiny.gguf; /api/models/o/<mode>?blobs=true lists."""

    server: "_Server"

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def log_message(self, format: str, *args: object) -> None:
        """Override BaseHTTPRequestHandler.log_message: the case reads Served.log instead."""

    def _dispatch(self, head: bool) -> None:
        state = self.server.state
        state.log.append((self.command, self.path, self.headers.get("Range"), self.headers.get("If-Range")))
        mode = self.path.strip("/").split("/")[0]
        if not head:
            state.gets[mode] = state.gets.get(mode, 0) + 1
        try:
            if self.path in state.listings:
                self._plain(200, state.listings[self.path])
            elif hasattr(self, "_" + mode.replace("-", "_")):
                getattr(self, "_" + mode.replace("-", "_"))(head, state)
            else:
                self._plain(404, b"")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on this answer, as it should

    # --- the modes ----------------------------------------------------------------------

    def _long_length_no_range(self, head: bool, state: Served) -> None:
        """Content-Length twice the body; Range ignored; the body ends and the connection closes."""
        self._start(200, len(state.v1) * 2)
        if not head:
            self.wfile.write(state.v1)

    def _range_short(self, head: bool, state: Served) -> None:
        """Content-Length twice the body; Range honoured against the body it really has."""
        start = self._range_start()
        if start is not None and start >= len(state.v1):
            self._start(416, 0, {"Content-Range": f"bytes */{len(state.v1)}"})
            return
        if start is None or head:
            self._start(200, len(state.v1) * 2)
        else:
            self._start(206, len(state.v1) * 2 - start,
                        {"Content-Range": f"bytes {start}-{len(state.v1) * 2 - 1}/{len(state.v1) * 2}"})
        if not head:
            self.wfile.write(state.v1[start or 0:])

    def _stall(self, head: bool, state: Served) -> None:
        """A kilobyte of the body, then nothing (the connection kept open)."""
        start = self._range_start() or 0
        self._start(206 if start else 200, len(state.v1) - start, self._range_headers(start, state.v1))
        if not head:
            self.wfile.write(state.v1[start:start + 1024])
            self.wfile.flush()
            self._hold()

    def _head_silent(self, head: bool, state: Served) -> None:
        """A HEAD is never answered; a GET would be."""
        if head:
            self._hold()
            return
        self._honest(head, state.v1)

    def _etag_changes(self, head: bool, state: Served) -> None:
        """Version 1 (ETag "v1") until 40 % of the first GET, then version 2 ("v2") from the
        next request on, whatever If-Range says (a naive server: a 206 of the new version)."""
        first_get = not head and state.gets.get("etag-changes") == 1
        body, etag = (state.v1, '"v1"') if first_get or not state.gets.get("etag-changes") else (state.v2, '"v2"')
        if first_get:
            self._start(200, len(body), {"ETag": etag})
            self.wfile.write(body[:len(body) * 4 // 10])
            self.close_connection = True
            return
        self._honest(head, body, {"ETag": etag})

    def _longer_body(self, head: bool, state: Served) -> None:
        """The HEAD states the size; the GET sends 4 MB more than that (and says so)."""
        if head:
            self._start(200, len(state.v1))
            return
        self._start(200, len(state.v1) + 4_000_000)
        self.wfile.write(state.v1 + bytes(4_000_000))

    def _endless(self, head: bool, state: Served) -> None:
        """The HEAD states the size; the GET has no Content-Length and never ends."""
        if head:
            self._start(200, len(state.v1))
            return
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(state.v1)
        deadline = time.monotonic() + _HOLD_S
        while time.monotonic() < deadline:
            self.wfile.write(bytes(65536))

    def _honest_server(self, head: bool, state: Served) -> None:
        """A well-behaved server (for the planted link case)."""
        self._honest(head, state.v1)

    # --- helpers --------------------------------------------------------------------------

    def _honest(self, head: bool, body: bytes, extra: dict[str, str] | None = None) -> None:
        start = self._range_start() or 0
        self._start(206 if start else 200, len(body) - start, {**self._range_headers(start, body), **(extra or {})})
        if not head:
            self.wfile.write(body[start:])

    def _range_start(self) -> int | None:
        wanted = (self.headers.get("Range") or "").removeprefix("bytes=").removesuffix("-")
        return int(wanted) if wanted.isdigit() else None

    @staticmethod
    def _range_headers(start: int, body: bytes) -> dict[str, str]:
        return {"Content-Range": f"bytes {start}-{len(body) - 1}/{len(body)}"} if start else {}

    def _start(self, status: int, length: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def _plain(self, status: int, body: bytes) -> None:
        self._start(status, len(body), {"Content-Type": "application/json"})
        self.wfile.write(body)

    def _hold(self) -> None:
        deadline = time.monotonic() + _HOLD_S
        while time.monotonic() < deadline and not self.server.closing.is_set():
            time.sleep(0.1)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    state: Served
    closing: threading.Event

    def handle_error(self, request: object, client_address: object) -> None:
        """Override socketserver's handle_error: clients that hang up are what this tests."""


@contextmanager
def hostile_server(v1: bytes, v2: bytes) -> Iterator[tuple[str, Served]]:
    """The server on 127.0.0.1 (a free port) for the block: its base address and its state."""
    server = _Server(("127.0.0.1", 0), _Hostile)
    server.state, server.closing = Served(v1, v2), threading.Event()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.state
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --- the cases --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """One case: the mode, what `models get` is given, the exit expected, the words the last
    message must hold (or the SHA-256 of the model that must be installed), its time bound."""

    name: str
    mode: str
    expect: int
    words: str
    limit_s: float
    fast: bool
    installs: str | None = None  # "v1" or "v2": the version that must end up installed
    listing: bytes | None = None


def plans() -> list[Plan]:
    from app.library.download.budget import CONNECT_S, RETRY_DELAYS, STALL_S

    tries, waits = len(RETRY_DELAYS) + 1, sum(RETRY_DELAYS)
    quick = 5.0 + SLACK_S
    return [
        Plan("Content-Length longer than the body, Range ignored", "long-length-no-range", 7,
             "tries", waits + quick, True),
        Plan("Content-Length longer than the body, Range honoured", "range-short", 7, "has only", quick, True),
        Plan("1 KB, then a stall", "stall", 7, "nothing arrived for", tries * STALL_S + waits + SLACK_S, False),
        Plan("a HEAD that never answers", "head-silent", 7, "did not answer within",
             tries * CONNECT_S + waits + SLACK_S, False),
        Plan("ETag changes between tries (If-Range ignored)", "etag-changes", 0, "", RETRY_DELAYS[0] + quick, True,
             installs="v2"),
        Plan("a body longer than stated", "longer-body", 7, "more than the", quick, True),
        Plan("an endless body, the size stated by HEAD", "endless", 7, "more than the", quick, True),
        Plan("a .part replaced by a link to another file", "honest-server", 0, "", quick, True, installs="v1"),
        Plan("a listing nested 100,000 deep", "listing-deep", 7, "did not answer with a list", quick, True,
             listing=b'{"siblings": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        *(Plan(f"a listing name {what}", f"listing-{key}", 3, words, quick, True, listing=_listing(name))
          for key, what, name, words in [
              ("nul", "with a NUL", "tiny\0.gguf", "control character"),
              ("rtl", "with a right-to-left override", "tiny\u202efggu.exe.gguf", "direction mark"),
              ("device", "that is a Windows device (LPT1)", "LPT1.gguf", "a name Windows keeps for a device"),
              ("long", "of 5,000 characters", "x" * 5000 + ".gguf", "longer than the 200 bytes"),
          ]),
    ]


def _listing(name: str) -> bytes:
    return json.dumps({"siblings": [{"rfilename": name, "size": 4}, {"rfilename": "README.md"}]}).encode()


def cat_hostile_download(ctx: Context) -> list[Case]:
    from tests.helpers.tiny_gguf import build_tiny_gguf

    v1 = ctx.tiny.read_bytes()
    v2 = build_tiny_gguf(ctx.folder("hostile-download v2") / "v2.gguf", seed=1).read_bytes()
    chosen = [p for p in plans() if p.fast or not ctx.sample]
    results = []
    with hostile_server(v1, v2) as (base, state):
        for plan in ctx.pick(chosen, 3, CATEGORY):
            results.append(_run_case(ctx, plan, base, state, {"v1": v1, "v2": v2}))
    return results


def _run_case(ctx: Context, plan: Plan, base: str, state: Served, versions: dict[str, bytes]) -> Case:
    case = Case(CATEGORY, plan.name)
    folder = ctx.folder(f"download {plan.mode}")
    home, canary = folder / "home", folder / "outside" / "someone else's.txt"
    canary.parent.mkdir()
    canary.write_bytes(b"k" * 1221)
    models = home / "data" / "models"
    if plan.listing is not None:
        state.listings[f"/api/models/o/{plan.mode}?blobs=true"] = plan.listing
        what, env = f"o/{plan.mode}", app_env(home, HF_ENDPOINT=base)
    else:
        what, env = f"{base}/{plan.mode}/tiny.gguf", app_env(home)
    if plan.mode == "honest-server":
        _plant_link(models, what, canary)
    before = _outside(folder, models)
    done = run([PYTHON, "-m", "app", "models", "get", what], env=env, timeout=plan.limit_s + 60)
    check_finished(case, done, {plan.expect}, limit_s=plan.limit_s)
    if plan.expect != 0:
        _check_message(case, done, plan.words)
    if plan.installs is not None:
        _check_installed(case, models, hashlib.sha256(versions[plan.installs]).hexdigest())
    case.check(_outside(folder, models) == before, "a file outside the models folder was written")
    case.check(canary.read_bytes() == b"k" * 1221, "the link's target was written through")
    if plan.mode == "etag-changes":
        resumes = [r for r in state.log if r[1].startswith("/etag-changes/") and r[2]]
        case.check(bool(resumes) and resumes[0][3] == '"v1"', f"the resume sent no If-Range: {resumes[:1]}")
    case.detail["requests"] = sum(1 for r in state.log if r[1].startswith(f"/{plan.mode}"))
    return case


def _plant_link(models: Path, url: str, target: Path) -> None:
    """What an earlier, interrupted `models get` leaves, with its part replaced by a link."""
    folder = models / "tiny"
    folder.mkdir(parents=True)
    (folder / ".download.json").write_text(json.dumps({"version": 1, "urls": [url], "source": url}))
    (folder / "tiny.gguf.part").symlink_to(target)


def _outside(folder: Path, models: Path) -> dict[str, tuple[int, int]]:
    """Every file of the case's folder outside the models folder: its size and modification time."""
    found = {}
    for top, _, files in os.walk(folder):
        if Path(top).is_relative_to(models):
            continue
        for name in files:
            info = (Path(top) / name).lstat()
            found[str(Path(top) / name)] = (info.st_size, info.st_mtime_ns)
    return found


def _check_message(case: Case, done: Finished, words: str) -> None:
    """The last message (the lines kestrel: starts) in plain words; progress lines aside."""
    said = "\n".join(line for line in done.stderr.splitlines() if line.startswith("kestrel:"))
    check_plain_message(case, Finished(done.code, done.stdout, said, done.seconds, done.peak_mb,
                                       done.traceback, done.strays))
    case.check(words in said, f"the message does not say {words!r}: {_short(said)}")


def _check_installed(case: Case, models: Path, sha256: str) -> None:
    installed = [p for p in models.rglob("*.gguf") if not p.is_symlink()]
    digests = [hashlib.sha256(p.read_bytes()).hexdigest() for p in installed]
    case.check(digests == [sha256], f"installed {len(installed)} file(s), not the version expected")


DESCRIPTION = ("`models get` against a lying, stalling, changing, endless server, a planted .part link "
               "and hostile listings: exit 7 or 3 in plain words within the download budget, or 0 with "
               "the right file; nothing written outside the models folder")
