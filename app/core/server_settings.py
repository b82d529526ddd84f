"""The local API server's settings: off, on loopback, with a key, until the user says otherwise."""

from __future__ import annotations

import dataclasses
import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_PORT = 8765
DEFAULT_SHARE_PORT = 8766  # Kestrel Link's TLS server, beside the API server's own port
LOOPBACK = "127.0.0.1"
KEY_PREFIX = "kestrel-"


def new_key() -> str:
    """A fresh API key: 32 random bytes, URL-safe, marked as Kestrel's."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether host names only this PC (127.0.0.0/8, ::1 or "localhost")."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServerSettings:
    """What the API server does when it is on.

    enabled: the window starts it (the CLI's `kestrel serve` starts it either way).
    host: loopback unless `listen_beyond_this_pc` says the user chose otherwise; a host
    that is not loopback without it is refused. key: "" until first use, then kept.
    keyless_loopback: requests from this PC need no key. cors_origins: the web origins
    that may call it from a browser (none: CORS is off). only_loaded_model: a request for
    another model gets a 400 instead of loading it. max_waiting: requests that may wait
    for the engine before more get 503. keep_as_chats: API conversations are saved as
    chats. tray_on_close: closing the window leaves Kestrel serving from the tray.
    share: Kestrel Link, "Share models with other computers": a second server, with TLS, on
    share_host ("": this PC's address on its network, found when it starts) and share_port,
    that only paired devices may use. Off, nothing listens beyond this PC for it.
    """

    enabled: bool = False
    host: str = LOOPBACK
    port: int = DEFAULT_PORT
    listen_beyond_this_pc: bool = False
    key: str = ""
    keyless_loopback: bool = False
    cors_origins: tuple[str, ...] = ()
    only_loaded_model: bool = False
    max_waiting: int = 4
    keep_as_chats: bool = False
    tray_on_close: bool = False
    share: bool = False
    share_host: str = ""
    share_port: int = DEFAULT_SHARE_PORT

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["cors_origins"] = list(self.cors_origins)
        return data

    def with_key(self) -> ServerSettings:
        """These settings with a key (a new one if there is none yet)."""
        return self if self.key else dataclasses.replace(self, key=new_key())

    def validated(self) -> ServerSettings:
        """These settings, or ValueError in plain words naming the bad one."""
        for name in ("enabled", "listen_beyond_this_pc", "keyless_loopback", "only_loaded_model",
                     "keep_as_chats", "tray_on_close", "share"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"server.{name} must be true or false (got {getattr(self, name)!r}).")
        if not isinstance(self.host, str) or not self.host.strip() or len(self.host) > 253:
            raise ValueError(f"server.host must be an address such as {LOOPBACK} (got {self.host!r}).")
        if not is_loopback(self.host) and not self.listen_beyond_this_pc:
            raise ValueError(f"server.host {self.host!r} is reachable from other machines: turn on "
                             f"listen_beyond_this_pc to allow it, or use {LOOPBACK}.")
        port = self.port
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError(f"server.port must be a whole number from 1 to 65535 (got {port!r}).")
        share_port = self.share_port
        if isinstance(share_port, bool) or not isinstance(share_port, int) or not 1 <= share_port <= 65535:
            raise ValueError(f"server.share_port must be a whole number from 1 to 65535 (got {share_port!r}).")
        if not isinstance(self.share_host, str) or len(self.share_host) > 253:
            raise ValueError(f"server.share_host must be an address of this PC, or empty (got {self.share_host!r}).")
        if not isinstance(self.key, str) or any(c.isspace() for c in self.key):
            raise ValueError("server.key must be text without spaces.")
        origins = self.cors_origins
        if isinstance(origins, str) or not all(isinstance(o, str) and o.strip() for o in origins):
            raise ValueError(f"server.cors_origins must be a list of origins such as "
                             f"http://localhost:3000 (got {origins!r}).")
        waiting = self.max_waiting
        if isinstance(waiting, bool) or not isinstance(waiting, int) or not 0 <= waiting <= 1000:
            raise ValueError(f"server.max_waiting must be a whole number from 0 to 1000 (got {waiting!r}).")
        return dataclasses.replace(self, host=self.host.strip(), share_host=self.share_host.strip(),
                                   cors_origins=tuple(o.strip() for o in origins))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], problems: list[str]) -> ServerSettings:
        """Every valid known value of data over the defaults; each bad one named in problems."""
        names = {f.name for f in dataclasses.fields(cls)}
        result = cls()
        # The permission first, so that a host it allows is not refused before it is read.
        for key, value in sorted(data.items(), key=lambda item: item[0] != "listen_beyond_this_pc"):
            if key not in names:
                continue
            if key == "cors_origins" and isinstance(value, list):
                value = tuple(value)
            try:
                result = dataclasses.replace(result, **{key: value}).validated()
            except (ValueError, TypeError):
                problems.append(f"server.{key}")
        return result
