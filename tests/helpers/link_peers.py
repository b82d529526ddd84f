"""A sharing Kestrel (Kestrel Link) on 127.0.0.1: `kestrel serve --share` in a home of its own, read until ready."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.core.paths import DataPaths
from app.library.models import ModelLibrary
from tests.helpers.remote_peers import free_port
from tests.server.serve_process import ROOT, interrupt, read_lines_until_key, serve_command, serve_env


@dataclass(frozen=True)
class SharingPeer:
    """A sharing Kestrel: its home, its TLS address for other PCs, the pairing code and fingerprint it printed."""

    home: Path
    shared: str
    code: str
    fingerprint: str
    share_port: int
    pid: int

    @property
    def link_folder(self) -> Path:
        return self.home / "data" / "link"


def peer_paths(home: Path) -> DataPaths:
    return DataPaths(home / "data", home / "config", home / "cache", home / "logs")


def _said(lines: list[str], start: str) -> str:
    return next(line for line in lines if line.startswith(start)).removeprefix(start)


@contextmanager
def sharing_peer(home: Path, model: Path | None = None, *, share_port: int | None = None) -> Iterator[SharingPeer]:
    """`kestrel serve --share` on 127.0.0.1 (the LAN address injected), the model referenced in its home."""
    paths = peer_paths(home).ensure()
    if model is not None:
        ModelLibrary(paths.models).add_reference(model)
    port = share_port or free_port()
    process = subprocess.Popen(serve_command("--port", str(free_port()), "--share", "--share-host", "127.0.0.1",
                                             "--share-port", str(port)),
                               cwd=ROOT, env=serve_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = read_lines_until_key(process)
        shared = _said(seen, "Sharing with other computers on ").split(" ")[0]
        code = _said(seen, "Pairing code: ").split(" ")[0]
        fingerprint = _said(seen, "Certificate fingerprint: ").replace(" ", "").lower()
        yield SharingPeer(home, shared, code, fingerprint, port, process.pid)
    finally:
        interrupt(process)
