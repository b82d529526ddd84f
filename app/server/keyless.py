"""What a request let in without a key must show: this PC's name as Host, a listed Origin, a JSON body.

Key-less mode trusts the programs of this PC. A web page the user visits runs on this PC too,
so without these checks it could use the server: a page whose own name resolves to 127.0.0.1
(DNS rebinding) reads the answers, and any page can post JSON sent as text/plain (a "simple"
request, which the browser sends without asking CORS first). A browser always sends the page's
name as Host and its origin as Origin, and cannot send a body typed application/json to another
site without CORS's consent: so each check closes one of those doors. A request with the key
needs none of them: a page cannot send the key to another site without CORS's consent either.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from starlette.types import Scope

from app.core.server_settings import ServerSettings

# The Host names that mean this PC, as every local client writes them.
_LOCAL_NAMES = ("localhost",)


@dataclass(frozen=True)
class Refusal:
    """Why a key-less request is refused: its status and plain words that say what to do."""

    status: int
    message: str


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1").strip()
    return None


def host_name(host: str) -> str:
    """The name in a Host header, without its port or an IPv6 address's brackets, lowercased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_local_host(host: str, bound: str) -> bool:
    """Whether a Host header names this PC: localhost, a loopback address, or the address bound."""
    name = host_name(host)
    if not name:
        return False
    if name in _LOCAL_NAMES or name == host_name(bound):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type says JSON: application/json, with or without its parameters."""
    return content_type is not None and content_type.split(";", 1)[0].strip().lower() == "application/json"


def keyless_refusal(scope: Scope, settings: ServerSettings) -> Refusal | None:
    """None if a request let in without a key may go on; else why not."""
    host = _header(scope, b"host")
    if host is None or not is_local_host(host, settings.host):
        given = "no Host header" if host is None else f"the Host {host!r}"
        return Refusal(403, f"This request names {given}. Without an API key, Kestrel's API server answers only "
                            f"requests addressed to this PC (localhost, 127.0.0.1 or [::1]), so that no web page "
                            f"can reach it under a name of its own. Call it at http://127.0.0.1 on its port, or "
                            f"send the API key.")
    origin = _header(scope, b"origin")
    if origin is not None and origin not in settings.cors_origins and "*" not in settings.cors_origins:
        return Refusal(403, f"This request comes from the web page {origin!r} (its Origin header), which is not in "
                            f"the API server's CORS origins. Without an API key, Kestrel answers web pages only "
                            f"from the origins listed in server.cors_origins: add this one in Kestrel's API server "
                            f"settings if you trust it, or send the API key.")
    if scope.get("method") == "POST":
        kind = _header(scope, b"content-type")
        if not is_json(kind):
            sent = "no Content-Type" if kind is None else f"Content-Type {kind!r}"
            return Refusal(415, f"This request's body comes with {sent}. Without an API key, Kestrel's API server "
                                f"takes only JSON bodies: send the header Content-Type: application/json, or "
                                f"send the API key.")
    return None
