"""Pairing with another Kestrel (Kestrel Link): check its certificate against the code, send the code, get this device's key.

The scheme, and why a man in the middle cannot pass it: app/library/servers/link_code.py.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.library.servers.link_code import read_code
from app.library.servers.wire import CONNECT_S, MAX_ERROR_BYTES, error_message, peer_fingerprint, pinned_context

PAIR_PATH = "/link/pair"
PAIR_WAIT_S = 20.0
MAX_PAIR_REPLY_BYTES = 64 * 1024
DEVICE_NAME_CHARS = 40


class PairingRefused(Exception):
    """Pairing did not happen; str() says why and what to do. Nothing was kept."""


@dataclass(frozen=True)
class Paired:
    """What pairing gave: this device's key on the sharing PC, and the certificate's fingerprint to pin."""

    key: str
    fingerprint: str
    device: str  # the name the sharing PC lists this device under


def this_device_name() -> str:
    """The name the sharing PC lists this PC under: its host name, bounded."""
    return (socket.gethostname().split(".")[0] or "a computer")[:DEVICE_NAME_CHARS]


def pair(url: str, typed_code: str, device: str, *, name: str = "the other PC") -> Paired:
    """Pair with the Kestrel at url (https://HOST:PORT) with the code shown there; PairingRefused in words.

    The certificate is checked against the code before the code is sent (link_code.py says why)."""
    code = read_code(typed_code)  # ValueError in words: nothing is contacted for a code mistyped
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise PairingRefused(f"{url} is not an https address: another Kestrel shares its models over TLS, at the "
                             "https://… address its API server window (or kestrel link status) shows.")
    connection = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=CONNECT_S, context=pinned_context())
    try:
        try:
            connection.connect()
        except ssl.SSLError as exc:
            raise PairingRefused(f"{url} did not complete a TLS connection ({exc.reason or exc}). Check that the "
                                 "address is the one the sharing PC shows, with https://.") from None
        except OSError as exc:
            raise PairingRefused(f"{url} did not answer ({exc.strerror or exc}). Is sharing on there, and is "
                                 "the address right? Check both, then try again.") from None
        fingerprint = peer_fingerprint(connection)
        if not fingerprint or not code.binds(fingerprint):
            raise PairingRefused(
                f"The pairing code does not match the certificate at {url}, so the code was not sent. Check that you "
                "typed the code shown on the sharing PC (a typo gives this too) and its address. If both are right, "
                "someone may be between the two computers: do not pair on this network.")
        return _ask_for_key(connection, url, code.text, device, fingerprint, name)
    finally:
        connection.close()


def _ask_for_key(connection: http.client.HTTPSConnection, url: str, code: str, device: str, fingerprint: str,
                 name: str) -> Paired:
    body = json.dumps({"code": code, "device": device[:DEVICE_NAME_CHARS]}).encode("utf-8")
    if connection.sock is not None:
        connection.sock.settimeout(PAIR_WAIT_S)
    try:
        connection.request("POST", PAIR_PATH, body=body, headers={"Content-Type": "application/json",
                                                                  "User-Agent": "Kestrel"})
        response = connection.getresponse()
        raw = response.read(MAX_PAIR_REPLY_BYTES + 1 if response.status == 200 else MAX_ERROR_BYTES)
    except (OSError, http.client.HTTPException) as exc:
        raise PairingRefused(f"{url} stopped answering while pairing ({exc}). Try again.") from None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        data = None
    if response.status != 200:
        said = error_message(data) or f"HTTP {response.status}"
        if response.status == 404 and data is None:
            said = "it does not pair devices (is it another Kestrel, with sharing on?)"
        raise PairingRefused(f"{name} refused to pair: {said}")
    key = data.get("key") if isinstance(data, dict) else None
    device_as = data.get("device") if isinstance(data, dict) else None
    if not isinstance(key, str) or not key or any(c.isspace() for c in key):
        raise PairingRefused(f"{url} answered pairing with something Kestrel cannot read. Is it another Kestrel?")
    return Paired(key, fingerprint, device_as if isinstance(device_as, str) else device)
