"""HTTP with the standard library: requests that follow redirects and keep every hop's headers.

http.client rather than urllib: Hugging Face states a file's SHA-256 and size on the
redirect (302) it answers first, which urllib's redirect handling would throw away.
"""

from __future__ import annotations

import errno
import http.client
import ipaddress
import re
import socket
import ssl
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Callable
from urllib.parse import urljoin, urlsplit

from app.library.download.budget import LOOKUP_S
from app.library.download.errors import (DownloadError, DownloadErrorKind, bad_scheme,
                                         host_of, refusal)

_REDIRECTS = {301, 302, 303, 307, 308}
_MAX_REDIRECTS = 10
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
_UNSATISFIED = re.compile(r"^bytes \*/(\d{1,20})$")
_HEAD_REFUSALS = frozenset(range(400, 500)) - {408, 429} | {501}
# No route to the host (the network is down or unplugged). Windows reports a socket's error
# by its WSA number, which is not what its C library calls ENETUNREACH: both are listed.
_NO_ROUTE = frozenset(code for name in ("ENETUNREACH", "EHOSTUNREACH", "ENETDOWN", "EHOSTDOWN")
                      for code in (getattr(errno, name, None), getattr(errno, "WSA" + name, None))
                      if code is not None)

# What a request says it is doing before the first byte ("Connecting to huggingface.co…").
Steps = Callable[[str], None]
# socket.getaddrinfo's answer: (family, type, proto, canonical name, address) per address.
Addresses = list[tuple[Any, ...]]


class TransientFailure(Exception):
    """A failure another try may cure: the network, a timeout, a 5xx, a dropped body.

    retry_after is the wait a 429 or 503 asked for (Retry-After), in seconds.
    """

    def __init__(self, reason: str, server_fault: bool = False, progressed: bool = False,
                 retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.server_fault = server_fault
        self.progressed = progressed
        self.retry_after = retry_after


class Unreachable(TransientFailure):
    """The host could not be reached at all: its name did not resolve (or the lookup got no
    answer), the connection was refused, or there is no route to it. Before the host has
    answered once, no wait cures that (the computer is offline, or the address is wrong):
    the caller makes it final. After, it is a network that dropped for a moment."""

    def __init__(self, host: str, reason: str, why: str) -> None:
        super().__init__(reason)
        self.host = host
        self.why = why  # "lookup", "lookup_timeout", "refused" or "no_route"


@dataclass
class Answer:
    """The last response of a request, its connection, and the headers of every hop."""

    response: http.client.HTTPResponse
    connection: http.client.HTTPConnection
    hops: list[http.client.HTTPMessage]
    sock: socket.socket | None = None

    def body_timeout(self, seconds: float) -> None:
        """How long one read of the body may wait (the headers had their own limit)."""
        if self.sock is not None:
            try:
                self.sock.settimeout(seconds)
            except OSError:  # already closed: the next read says so
                pass

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

    def unsatisfied_total(self) -> int | None:
        """The file's size a 416 states (`Content-Range: bytes */<size>`), None when it does not."""
        found = _UNSATISFIED.match(self.response.getheader("Content-Range") or "")
        return int(found.group(1)) if found else None

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


def stated_sha256(answer: Answer) -> str | None:
    """The SHA-256 a server states for the file, read as huggingface_hub reads a file's etag:
    X-Linked-Etag (any hop: HF sends it on its redirect to storage), else the ETag of the
    answer to the address asked (the first hop), quotes and W/ stripped. Hugging Face's
    ETag of an LFS file is its SHA-256 (a git file's is a 40-digit SHA-1, not taken);
    only 64 hexadecimal digits count. A storage host's own ETag (an MD5) is never read.
    """
    return sha256_from_etag(answer.header("X-Linked-Etag") or answer.hops[0].get("ETag"))


def probe(url: str, timeout: float, steps: Steps | None = None, lookup_s: float = LOOKUP_S) -> RemoteFacts:
    """HEAD the file: X-Linked-Size / X-Linked-Etag (or a SHA-256 ETag) where sent, else Content-Length.

    A 4xx from a host the first one redirected to is not final: a storage host may refuse
    a HEAD on a URL signed for GET only, and what the first hop stated still stands.
    """
    answer = request(url, "HEAD", timeout, accept=_HEAD_REFUSALS, steps=steps, lookup_s=lookup_s)
    try:
        sha256 = stated_sha256(answer)
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
            accept: frozenset[int] | set[int] = frozenset(), steps: Steps | None = None,
            lookup_s: float = LOOKUP_S) -> Answer:
    """Send the request, following redirects; the answer is a 2xx or a status in accept.

    Each hop's name lookup has lookup_s seconds, then `timeout` seconds in all to connect
    and send its headers. A 4xx is final (DownloadError naming `url`); a host that cannot
    be reached is Unreachable; a 5xx, 429 or other network failure is a TransientFailure
    for the caller to retry. steps hears what each hop is doing before its answer.
    """
    hops: list[http.client.HTTPMessage] = []
    current = url
    for _ in range(_MAX_REDIRECTS + 1):
        connection, response, sock = _send(current, method, timeout, headers or {}, steps, lookup_s)
        hops.append(response.msg)
        location = response.getheader("Location")
        if response.status in _REDIRECTS and location:
            response.close()
            connection.close()
            current = urljoin(current, location)
            check_scheme(current)
            continue
        answer = Answer(response, connection, hops, sock)
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
    if isinstance(exc, OSError) and exc.errno in _NO_ROUTE:
        return "there is no route to it"
    if isinstance(exc, (ConnectionResetError, ConnectionAbortedError, http.client.IncompleteRead)):
        return "the connection was dropped"
    return str(exc) or type(exc).__name__


def _send(url: str, method: str, timeout: float, headers: dict[str, str], steps: Steps | None,
          lookup_s: float) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse, socket.socket | None]:
    parts = urlsplit(url)
    secure = parts.scheme.lower() == "https"
    kind = http.client.HTTPSConnection if secure else http.client.HTTPConnection
    host, shown = parts.hostname or "", host_of(url)
    said = steps or (lambda _: None)
    addresses = _lookup(host, parts.port or (443 if secure else 80), min(lookup_s, timeout), said)
    connection = kind(host, parts.port, timeout=timeout)
    # http.client would look the name up again, without a time limit: it connects to the
    # addresses already found instead (TLS still checks the certificate against the name).
    connection._create_connection = lambda _address, seconds, _source=None: _connect(  # type: ignore[attr-defined]
        addresses, seconds, shown)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    late = _Late(timeout)
    try:
        said(f"Connecting to {shown}…")
        connection.connect()
        late.watch(connection.sock)
        said(f"Waiting for {shown} to answer…")
        connection.request(method, target, headers={"Accept-Encoding": "identity",
                                                    "User-Agent": "Kestrel", **headers})
        response = connection.getresponse()
        if late.done():
            return connection, response, late.sock
        response.close()
        connection.close()
        raise TransientFailure(f"the server did not answer within {timeout:g} s")
    except ssl.SSLCertVerificationError as exc:
        late.done()
        connection.close()
        raise DownloadError(DownloadErrorKind.NETWORK,
                            f"The certificate of {parts.hostname} could not be verified "
                            f"({exc.verify_message}), so nothing was downloaded from it.") from None
    except Unreachable:
        late.done()
        connection.close()
        raise
    except (OSError, http.client.HTTPException) as exc:
        cut = not late.done() or isinstance(exc, TimeoutError)
        connection.close()
        raise TransientFailure(f"the server did not answer within {timeout:g} s" if cut
                               else describe(exc)) from None


def _lookup(host: str, port: int, seconds: float, said: Steps) -> Addresses:
    """The host's addresses, looked up within `seconds`: a resolver with no network to ask can
    take many seconds per try to say so, and the user is waiting for that answer.

    The lookup goes on in its thread after the time is up (getaddrinfo cannot be cut short);
    its answer is then dropped.
    """
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:  # an address already: nothing to look up
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    said(f"Looking up {host}…")
    found: list[Addresses | OSError] = []
    answered = threading.Event()

    def look() -> None:
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:  # socket.gaierror
            found.append(exc)
        except UnicodeError as exc:  # a name the IDNA codec refuses (a label over 63 letters)
            found.append(OSError(str(exc)))
        finally:
            answered.set()

    threading.Thread(target=look, name=f"look up {host}", daemon=True).start()
    if not answered.wait(seconds):
        raise Unreachable(host, f"looking up its name got no answer within {seconds:g} s",
                          "lookup_timeout")
    result = found[0]
    if isinstance(result, OSError) or not result:
        raise Unreachable(host, "its name could not be looked up (is the computer online?)", "lookup")
    return result


def _connect(addresses: Addresses, seconds: float | None, shown: str) -> socket.socket:
    """A connection to the first address that takes one, as socket.create_connection makes it;
    a refusal or no route from every address is Unreachable."""
    errors: list[OSError] = []
    for family, kind, proto, _name, address in addresses:
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(seconds)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            errors.append(exc)
    last = errors[-1] if errors else OSError("no address to connect to")
    if isinstance(last, ConnectionRefusedError):
        raise Unreachable(shown, "the connection was refused", "refused")
    if last.errno in _NO_ROUTE:
        raise Unreachable(shown, "there is no route to it", "no_route")
    raise last


class _Late:
    """Shuts a connection whose answer's headers have not all come within the time: a socket
    timeout alone bounds each read, and a server can send one byte per read forever."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._lock = threading.Lock()
        self._state = "waiting"  # then "answered" or "cut"
        self._timer: threading.Timer | None = None
        self.sock: socket.socket | None = None

    def watch(self, sock: socket.socket | None) -> None:
        self.sock = sock
        self._timer = threading.Timer(self._seconds, self._cut)
        self._timer.daemon = True
        self._timer.start()

    def done(self) -> bool:
        """Stop watching; False when the time ran out and the connection was shut."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            if self._state == "waiting":
                self._state = "answered"
            return self._state == "answered"

    def _cut(self) -> None:
        with self._lock:
            if self._state != "waiting":
                return
            self._state = "cut"
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _raise_for_status(url: str, answer: Answer) -> None:
    status, reason = answer.status, answer.response.reason
    if 200 <= status < 300:
        return
    answer.close()
    if status >= 500 or status in (408, 429):
        raise TransientFailure(f"{status} {reason}".strip(), server_fault=True,
                               retry_after=retry_after(answer.response.getheader("Retry-After")))
    raise refusal(url, status, reason)


def retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """A Retry-After header's wait in seconds: a number of seconds, or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def _integer(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None
