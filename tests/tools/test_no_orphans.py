"""No server outlives Kestrel: close() ends each server and its children, and a SIGKILLed Kestrel takes
its servers with it (Linux: PR_SET_PDEATHSIG through app/tools/launcher.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from app.tools.pool import McpPool
from tests.tools.conftest import python_server, run

GONE_WITHIN_S = 10


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # dead, waiting for whoever reaps it
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids: list[int]) -> list[int]:
    """The pids still alive after the wait."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline and not all(_gone(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if not _gone(pid)]


def _server_pids() -> list[int]:
    return [child.pid for child in psutil.Process().children() if "tools_server.py" in " ".join(child.cmdline())]


def test_close_ends_each_server_and_the_children_it_started() -> None:
    async def scenario() -> tuple[list[int], int]:
        pool = McpPool(lambda: [python_server("parent", "tools_server.py", "--child")])
        try:
            tools = {tool.name: tool for tool in await pool.tools(["parent"])}
            grandchild = int((await pool.call(tools["child_pid"], {})).text)
            servers = _server_pids()
            assert len(servers) == 1 and psutil.Process(grandchild).ppid() == servers[0]
        finally:
            await pool.close()
        return servers, grandchild

    servers, grandchild = run(scenario())
    assert _wait_gone([*servers, grandchild]) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_servers_die_with_a_kestrel_that_is_killed(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, str(Path(__file__).with_name("pool_parent.py"))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        servers = json.loads(line)
        assert len(servers) == 3, line
        assert all(not _gone(pid) for pid in servers)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        if parent.stdout is not None:
            parent.stdout.close()
    assert _wait_gone(servers) == []
