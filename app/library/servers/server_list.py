"""servers.json: the servers the person added, in a versioned file written whole (old or new, never torn)."""

from __future__ import annotations

import builtins
import dataclasses
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.core.files import exclusive_lock, write_atomically
from app.core.paths import DataPaths
from app.library.servers.records import (DEFAULT_WAIT_S, AddedServer, ModelOverride, ServerKind, checked_name,
                                         checked_pin, checked_url)

SERVERS_VERSION = 1
SERVERS_FILE = "servers.json"


def servers_file(paths: DataPaths) -> Path:
    """Where the list is: beside settings.json. The engine process reads the same file."""
    return paths.config / SERVERS_FILE


class ServerListError(Exception):
    """The list could not be changed: a damaged file, one from a newer Kestrel, or a disk that refused; str() says what to do."""


class ServerList:
    """Reads and changes servers.json. Reading forgives (a damaged file lists no server and says so in
    last_problem); each change reads the file again under a lock, so the window and the CLI can both write."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last_problem: str | None = None

    def list(self) -> tuple[AddedServer, ...]:
        """The servers in the order they were added."""
        servers, _ = self._read()
        return servers

    def get(self, name: str) -> AddedServer | None:
        """The server of that name (letter case aside), or None."""
        return next((s for s in self.list() if s.name.casefold() == name.strip().casefold()), None)

    def add(self, name: str, url: str, kind: ServerKind, *, wait_s: float = DEFAULT_WAIT_S,
            pin: str = "") -> AddedServer:
        """Add a server; ValueError in words for a bad name or address, or a name already taken."""
        server = AddedServer(checked_name(name), ServerKind(kind), checked_url(url), time.time(), _checked_wait(wait_s),
                             pin=checked_pin(pin))
        with self._changing() as servers:
            if any(s.name.casefold() == server.name.casefold() for s in servers):
                raise ValueError(f'A server called "{server.name}" is added already: choose another name, or remove '
                                 "that one first.")
            servers.append(server)
        return server

    def remove(self, name: str) -> AddedServer | None:
        """Forget a server; the one removed, or None if there was none of that name."""
        with self._changing() as servers:
            found = next((s for s in servers if s.name.casefold() == name.strip().casefold()), None)
            if found is not None:
                servers.remove(found)
        return found

    def set_override(self, name: str, model: str, override: ModelOverride) -> AddedServer:
        """Keep what the person set by hand for one model of a server; LookupError if there is no such server."""
        with self._changing() as servers:
            index = next((i for i, s in enumerate(servers) if s.name.casefold() == name.strip().casefold()), None)
            if index is None:
                raise LookupError(f'No server called "{name}" is added.')
            overrides = dict(servers[index].overrides)
            if override.to_json():
                overrides[model] = override
            else:
                overrides.pop(model, None)
            servers[index] = dataclasses.replace(servers[index], overrides=overrides)
            return servers[index]

    # --- the file ---------------------------------------------------------------------------

    def _read(self) -> tuple[tuple[AddedServer, ...], int]:
        """The servers and the file's version (0: no file). A damaged entry is left out and said."""
        self.last_problem = None
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return (), 0
        except OSError as error:
            self.last_problem = f"Kestrel could not read its list of servers {self.path} ({error.strerror})."
            return (), 0
        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("servers"), list):
                raise ValueError("not a list of servers")
            version = data.get("version")
            version = version if isinstance(version, int) and not isinstance(version, bool) else 0
        except (ValueError, RecursionError):
            self.last_problem = (f"Kestrel's list of servers {self.path} is damaged, so no server is listed. Adding a "
                                 "server sets the damaged file aside and starts a new list.")
            return (), -1
        servers: builtins.list[AddedServer] = []
        skipped = 0
        for entry in data["servers"]:
            try:
                servers.append(AddedServer.from_json(entry))
            except (KeyError, ValueError, TypeError, AttributeError):
                skipped += 1
        if skipped:
            self.last_problem = f"{skipped} server(s) in {self.path} could not be read and are not listed."
        return tuple(servers), version

    @contextmanager
    def _changing(self) -> Iterator[builtins.list[AddedServer]]:
        """The servers as the file holds them now, under the list's lock; written back when the block ends
        without an error. A damaged file is set aside first; one from a newer Kestrel is left as it is."""
        with exclusive_lock(self.path.with_name(f".{self.path.name}.lock")):
            servers, version = self._read()
            if version > SERVERS_VERSION:
                raise ServerListError(f"Kestrel's list of servers {self.path} comes from a newer version of "
                                      "Kestrel, and this version leaves it as it is. Update Kestrel to change it.")
            if version < 0:
                self._set_aside()
            changed = list(servers)
            yield changed
            self._write(changed)

    def _write(self, servers: builtins.list[AddedServer]) -> None:
        data: dict[str, Any] = {"version": SERVERS_VERSION, "servers": [s.to_json() for s in servers]}
        try:
            write_atomically(self.path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        except OSError as error:
            raise ServerListError(f"Kestrel could not save its list of servers to {self.path} ({error.strerror}). "
                                  "Check that the disk has free space and the folder is writable.") from error

    def _set_aside(self) -> None:
        aside = self.path.with_name(f"{self.path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            os.replace(self.path, aside)
        except OSError as error:
            raise ServerListError(f"Kestrel's list of servers {self.path} is damaged and could not be set aside "
                                  f"({error.strerror}). Delete it to start a new list.") from error


def _checked_wait(wait_s: float) -> float:
    if not 1 <= wait_s <= 3600:
        raise ValueError("The wait for a server's answer must be from 1 to 3600 seconds.")
    return float(wait_s)
