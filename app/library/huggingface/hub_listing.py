"""A Hugging Face repository's file listing: one bounded GET of the hub's model API, read defensively."""

from __future__ import annotations

import http.client
import json
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from app.library.download.errors import DownloadError, DownloadErrorKind, gave_up, unreachable
from app.library.download.transport import Answer, Steps, TransientFailure, Unreachable, describe, request
from app.library.huggingface.file_names import name_problem

_MAX_LISTING = 32 * 1024 * 1024
_MAX_FILES = 100_000  # the biggest model repositories hold tens of thousands of files
_LISTING_S = 60.0  # a listing is a few megabytes at most: a minute is plenty on a slow line


@dataclass(frozen=True)
class RepoFile:
    """A file the repository listing names, with the size and LFS SHA-256 where it gives them.

    refused says why its name cannot be saved as a file (file_names.name_problem); such a
    file is never offered, nor is an ONNX folder that holds one.
    """

    path: str
    size: int | None
    sha256: str | None
    refused: str | None = None


def repo_files(repo: str, revision: str, endpoint: str, timeout: float,
               steps: Steps | None = None) -> list[RepoFile]:
    """GET {endpoint}/api/models/{repo}[/revision/{rev}]?blobs=true, as huggingface_hub's
    model_info(files_metadata=True) does; its siblings are the repository's files."""
    at = "" if revision == "main" else f"/revision/{quote(revision, safe='')}"
    url = f"{endpoint}/api/models/{repo}{at}?blobs=true"
    try:
        body = bounded_get(url, timeout, steps, _MAX_LISTING, _LISTING_S, "its list of files")
    except DownloadError as exc:
        if exc.kind in (DownloadErrorKind.NOT_FOUND, DownloadErrorKind.NEEDS_LOGIN):
            raise DownloadError(exc.kind, f"{urlsplit(endpoint).netloc} has no public model "
                                f"repository named {repo} (at {revision}). Check the name; a "
                                f"private or gated one must be downloaded in a browser.") from None
        raise
    return _siblings(url, body)


def bounded_get(url: str, timeout: float, steps: Steps | None, cap: int, seconds: float, what: str) -> bytes:
    """One GET of a JSON answer, tried once, read as at most cap + 1 bytes within seconds.

    DownloadError in the downloader's words: a host that cannot be reached, a failure, an
    HTTP error (NOT_FOUND, NEEDS_LOGIN…), or a server that trickles (what names the answer:
    "its list of files did not arrive within 60 s")."""
    try:
        answer = request(url, "GET", timeout, {"Accept": "application/json"}, steps=steps)
    except Unreachable as failure:
        raise unreachable(failure.host, failure.why, False) from None
    except TransientFailure as failure:
        raise gave_up(url, failure.reason, 1, failure.server_fault) from None
    try:
        return _read_bounded(answer, url, cap, seconds, what)
    except (OSError, http.client.HTTPException) as exc:
        raise gave_up(url, describe(exc), 1, False) from None
    finally:
        answer.close()


def _read_bounded(answer: Answer, url: str, cap: int, seconds: float, what: str) -> bytes:
    """At most cap + 1 bytes within seconds: a server that trickles is given up on."""
    deadline = time.monotonic() + seconds
    chunks: list[bytes] = []
    size = 0
    while size <= cap:
        if time.monotonic() > deadline:
            raise gave_up(url, f"{what} did not arrive within {seconds:g} s", 1, True)
        block = answer.response.read1(min(65536, cap + 1 - size))
        if not block:
            break
        chunks.append(block)
        size += len(block)
    return b"".join(chunks)


def _siblings(url: str, body: bytes) -> list[RepoFile]:
    """The listing's files; a name that cannot be saved is kept with why, to be left out.

    Parsed defensively: at most _MAX_LISTING bytes and _MAX_FILES files, and JSON nested
    deeper than the parser allows (RecursionError) is a listing that is not one.
    """
    try:
        if len(body) > _MAX_LISTING:
            raise ValueError("too long")
        data = json.loads(body)
        siblings = data["siblings"]
        if not isinstance(siblings, list) or len(siblings) > _MAX_FILES:
            raise TypeError("siblings is not a list of files")
        return [RepoFile(s["rfilename"], _size(s), _lfs_sha(s), name_problem(s["rfilename"]))
                for s in siblings if isinstance(s, dict) and isinstance(s.get("rfilename"), str)]
    except (ValueError, KeyError, TypeError, RecursionError):
        raise DownloadError(DownloadErrorKind.REFUSED,
                            f"{urlsplit(url).netloc} did not answer with a list of a repository's "
                            f"files at {url}. Check the address: Kestrel expects a Hugging Face "
                            f"server or a mirror of one.") from None


def _size(sibling: dict[str, Any]) -> int | None:
    lfs = sibling.get("lfs")
    for value in ((lfs or {}).get("size") if isinstance(lfs, dict) else None, sibling.get("size")):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _lfs_sha(sibling: dict[str, Any]) -> str | None:
    lfs = sibling.get("lfs")
    value = lfs.get("sha256") if isinstance(lfs, dict) else None
    return value.lower() if isinstance(value, str) and re.fullmatch(r"[0-9a-fA-F]{64}", value) else None
