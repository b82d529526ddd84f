"""Kestrel Link off (the default): `kestrel serve` listens on loopback only and makes no certificate; on, its
sharing server is the only socket beyond the API server's."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.helpers.link_peers import sharing_peer
from tests.helpers.remote_peers import free_port
from tests.server.serve_process import ROOT, interrupt, read_ready, serve_command, serve_env
from tests.service.conftest import install

pytestmark = pytest.mark.slow


def listening(pid: int) -> list[tuple[str, int]]:
    """The addresses the process and its children listen on."""
    processes = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return [(c.laddr.ip, c.laddr.port) for p in processes for c in p.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN]


def test_with_sharing_off_nothing_listens_beyond_this_pc(tiny_model: Path, kestrel_home: Path) -> None:
    install(tiny_model)
    process = subprocess.Popen(serve_command("--port", str(free_port())), cwd=ROOT, env=serve_env(kestrel_home),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        read_ready(process)
        sockets = listening(process.pid)
    finally:
        interrupt(process)
    assert len(sockets) == 1 and all(ipaddress.ip_address(ip).is_loopback for ip, _ in sockets), sockets
    assert not (kestrel_home / "data" / "link").exists()  # no certificate, no code, until sharing is turned on


def test_with_sharing_on_its_tls_server_is_the_one_more_socket(tmp_path: Path, tiny_model: Path) -> None:
    with sharing_peer(tmp_path / "sharing", tiny_model) as peer:  # a model: else the 1.1 GB starter is put together
        sockets = listening(peer.pid)
    assert ("127.0.0.1", peer.share_port) in sockets and len(sockets) == 2, sockets
