"""The devices paired with this PC (devices.json): each one's name, when it paired, and its key's SHA-256, never the key."""

from __future__ import annotations

import builtins
import hashlib
import hmac
import json
import os
import secrets
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.files import exclusive_lock, write_atomically

DEVICES_FILE = "devices.json"
DEVICES_VERSION = 1
DEVICE_KEY_PREFIX = "kestrel-link-"
NAME_CHARS = 40


@dataclass(frozen=True)
class PairedDevice:
    """A device that paired: the name it gave (made unique here), when, and its key's SHA-256 (hex)."""

    name: str
    paired: float
    key_sha256: str


def _hashed(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def device_name(given: str) -> str:
    """A name a device gave, as listed: printable, one line, bounded ("a computer" for none)."""
    name = "".join(c for c in given if c.isprintable()).strip()[:NAME_CHARS]
    return name or "a computer"


class PairedDevices:
    """Reads and changes devices.json; admits() is what the sharing server asks for every request.

    A revoke from another process (`kestrel link revoke` while the window shares) takes effect at the next
    request: the file is read again whenever it changed."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / DEVICES_FILE
        self._seen: tuple[int, int] | None = None
        self._hashes: tuple[str, ...] = ()

    def list(self) -> tuple[PairedDevice, ...]:
        """The devices in the order they paired."""
        return self._read()

    def add(self, given_name: str) -> tuple[PairedDevice, str]:
        """Pair a device: its record and its key (shown to it once, kept here only as a hash)."""
        key = DEVICE_KEY_PREFIX + secrets.token_urlsafe(32)
        with self._changing() as devices:
            name, number, taken = device_name(given_name), 2, {d.name.casefold() for d in devices}
            unique = name
            while unique.casefold() in taken:
                unique, number = f"{name} ({number})", number + 1
            device = PairedDevice(unique, time.time(), _hashed(key))
            devices.append(device)
        return device, key

    def revoke(self, name: str) -> PairedDevice | None:
        """Forget a device: its key is refused from the next request on. The one revoked, or None."""
        with self._changing() as devices:
            found = next((d for d in devices if d.name.casefold() == name.strip().casefold()), None)
            if found is not None:
                devices.remove(found)
        return found

    def admits(self, key: str) -> bool:
        """Whether key is a paired device's key."""
        if not key.startswith(DEVICE_KEY_PREFIX):
            return False
        hashed = _hashed(key)
        # compare_digest over every entry: the time taken says nothing about which or how much matched.
        return sum(hmac.compare_digest(hashed, known) for known in self._current_hashes()) > 0

    def _current_hashes(self) -> tuple[str, ...]:
        try:
            stat = self.path.stat()
            seen: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            seen = None
        if seen != self._seen or seen is None:
            self._hashes = tuple(d.key_sha256 for d in self._read())
            self._seen = seen
        return self._hashes

    def _read(self) -> tuple[PairedDevice, ...]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return ()  # none, or a damaged file: no device is let in (pair again)
        entries = data.get("devices") if isinstance(data, dict) else None
        devices = []
        for entry in entries if isinstance(entries, list) else []:
            try:
                devices.append(PairedDevice(str(entry["name"]), float(entry["paired"]), str(entry["key_sha256"])))
            except (KeyError, TypeError, ValueError):
                continue
        return tuple(devices)

    @contextmanager
    def _changing(self) -> Iterator[builtins.list[PairedDevice]]:
        """The devices as the file holds them, under its lock; written back when the block ends without an error."""
        with exclusive_lock(self.path.with_name(f".{self.path.name}.lock")):
            devices = list(self._read())
            yield devices
            self._write(devices)

    def _write(self, devices: builtins.list[PairedDevice]) -> None:
        data: dict[str, Any] = {"version": DEVICES_VERSION, "devices": [
            {"name": d.name, "paired": d.paired, "key_sha256": d.key_sha256} for d in devices]}
        write_atomically(self.path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        if sys.platform != "win32":
            os.chmod(self.path, 0o600)

