"""HTTP with the standard library: requests that follow redirects and keep every hop's headers.

http.client rather than urllib: Hugging Face states a file's SHA-256 and size on the
redirect (302) it answers first, which urllib's redirect handling would throw away.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from app.library.download.errors import (DownloadError, DownloadErrorKind, bad_scheme,
                                         host_of, refusal)

_REDIRECTS = {301, 302, 303, 307, 308}
_MAX_REDIRECTS = 10
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
_HEAD_REFUSALS = frozenset(range(400, 500)) - {408, 429} | {501}


class TransientFailure(Exception):
    """A failure another try may cure: the network, a timeout, a 5xx, a dropped body."""

    def __init__(self, reason: str, server_fault: bool = False, progressed: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.server_fault = server_fault
        self.progressed = progressed


@dataclass
class Answer:
    """The last response of a request, its connection, and the headers of every hop."""

    response: http.client.HTTPResponse
    connection: http.client.HTTPConnection
    hops: list[http.client.HTTPMessage]

    @property
    def status(self) -> int:
        return self.response.status

    def header(self, name: str) -> str | None:
        """The header as the first hop that sent it said it (HF's are on the redirect)."""
        for hop in self.hops:
            value = hop.get(name)
            if value is not None:
                return value
        return None

    def content_range(self) -> tuple[int, int | None] | None:
        """(first byte, total or None) of a 206 answer, None when it does not say."""
        found = _CONTENT_RANGE.match(self.response.getheader("Content-Range") or "")
        if found is None:
            return None
        total = None if found.group(3) == "*" else int(found.group(3))
        return int(found.group(1)), total

    def close(self) -> None:
        # With HTTP/1.0 or "Connection: close" the response owns the socket, not the connection.
        self.response.close()
        self.connection.close()


@dataclass(frozen=True)
class RemoteFacts:
    """What a server states about a file before it is fetched; None where it is silent."""

    size: int | None
    sha256: str | None


def check_scheme(url: str) -> None:
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a port that is not a number
    except ValueError:
        raise bad_scheme(url) from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise bad_scheme(url)


def probe(url: str, timeout: float) -> RemoteFacts:
    """HEAD the file: X-Linked-Size / X-Linked-Etag where sent, else Content-Length.

    A 4xx from a host the first one redirected to is not final: a storage host may refuse
    a HEAD on a URL signed for GET only, and what the first hop stated still stands.
    """
    answer = request(url, "HEAD", timeout, accept=_HEAD_REFUSALS)
    try:
        sha256 = sha256_from_etag(answer.header("X-Linked-Etag"))
        linked_size = _integer(answer.header("X-Linked-Size"))
        if answer.status >= 400:
            if len(answer.hops) == 1 and answer.status not in (405, 501):
                raise refusal(url, answer.status, answer.response.reason)
            return RemoteFacts(linked_size, sha256)
        length = _integer(answer.response.getheader("Content-Length"))
        return RemoteFacts(linked_size if linked_size is not None else length, sha256)
    finally:
        answer.close()


def sha256_from_etag(etag: str | None) -> str | None:
    """The SHA-256 in an ETag like HF's `"<64 hex>"`; anything else is not a SHA-256."""
    if etag is None:
        return None
    value = etag.strip().removeprefix("W/").strip('"').lower()
    return value if _SHA256.match(value) else None


def request(url: str, method: str, timeout: float, headers: dict[str, str] | None = None,
            accept: frozenset[int] | set[int] = frozenset()) -> Answer:
    """Send the request, following redirects; the answer is a 2xx or a status in accept.

    A 4xx is final (DownloadError naming `url`); a 5xx, 429 or network failure is a
    TransientFailure for the caller to retry.
    """
    hops: list[http.client.HTTPMessage] = []
    current = url
    for _ in range(_MAX_REDIRECTS + 1):
        connection, response = _send(current, method, timeout, headers or {})
        hops.append(response.msg)
        location = response.getheader("Location")
        if response.status in _REDIRECTS and location:
            response.close()
            connection.close()
            current = urljoin(current, location)
            check_scheme(current)
            continue
        answer = Answer(response, connection, hops)
        if response.status not in accept:
            _raise_for_status(url, answer)
        return answer
    raise DownloadError(DownloadErrorKind.REFUSED,
                        f"{host_of(url)} kept redirecting Kestrel without giving out {url}. "
                        f"Check the address, or download the file in a browser.")


def describe(exc: BaseException) -> str:
    """A network failure in a few words."""
    if isinstance(exc, socket.gaierror):
        return "its name could not be looked up (is the computer online?)"
    if isinstance(exc, TimeoutError):
        return "the connection timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "the connection was refused"
    if isinstance(exc, (ConnectionResetError, ConnectionAbortedError, http.client.IncompleteRead)):
        return "the connection was dropped"
    return str(exc) or type(exc).__name__


def _send(url: str, method: str, timeout: float,
          headers: dict[str, str]) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme.lower() == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname or "", parts.port, timeout=timeout)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request(method, target, headers={"Accept-Encoding": "identity",
                                                    "User-Agent": "Kestrel", **headers})
        return connection, connection.getresponse()
    except ssl.SSLCertVerificationError as exc:
        connection.close()
        raise DownloadError(DownloadErrorKind.NETWORK,
                            f"The certificate of {parts.hostname} could not be verified "
                            f"({exc.verify_message}), so nothing was downloaded from it.") from None
    except (OSError, http.client.HTTPException) as exc:
        connection.close()
        raise TransientFailure(describe(exc)) from None


def _raise_for_status(url: str, answer: Answer) -> None:
    status, reason = answer.status, answer.response.reason
    if 200 <= status < 300:
        return
    answer.close()
    if status >= 500 or status in (408, 429):
        raise TransientFailure(f"{status} {reason}".strip(), server_fault=True)
    raise refusal(url, status, reason)


def _integer(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None
