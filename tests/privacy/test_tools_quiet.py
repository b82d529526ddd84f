"""MCP servers are the user's own programs and addresses: Kestrel starts none and connects to none until a
chat asks for a configured server's tools. Importing app.tools, building a pool, reading its status and
closing it, and `kestrel tools list`, start no process and open no network socket."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.syscalls import findings, strace_or_skip

ROOT = Path(__file__).resolve().parents[2]
CALLS = "socket,socketpair,connect,bind,sendto,execve,clone,clone3,fork,vfork"
POOL_WITHOUT_A_CALL = """
import asyncio, sys
from app.tools.mcp_config import McpServerConfig, read_mcp_config
from app.tools.pool import McpPool
from app.core.paths import data_paths
servers, problems = read_mcp_config(data_paths().mcp_file)
assert len(servers) == 2 and not problems, (servers, problems)
pool = McpPool(lambda: servers)
assert [status.state.value for status in pool.status()] == ["stopped", "stopped"]
asyncio.run(pool.close())
"""


def _configure(home: Path) -> None:
    config = home / "config"
    config.mkdir(parents=True)
    (config / "mcp.json").write_text(json.dumps({"mcpServers": {
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
        "remote": {"url": "http://192.0.2.1:8080/mcp"},
    }}), encoding="utf-8")


def _trace(args: list[str], tmp_path: Path, home: Path) -> str:
    log = tmp_path / "strace.log"
    env = dict(os.environ, KESTREL_HOME=str(home), PYTHONPATH=str(ROOT))
    done = subprocess.run([strace_or_skip(), "-f", "-qq", "-e", f"trace={CALLS}", "-o", str(log), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return log.read_text(errors="replace")


def _started_processes(log: str) -> list[str]:
    """execve after the first (the program itself), and clone/fork that make a process, not a thread."""
    execs = [line for line in log.splitlines() if re.search(r"\bexecve\(", line)]
    forks = [line for line in log.splitlines() if re.search(r"\b(clone3?|fork|vfork)\(", line)
             and "CLONE_THREAD" not in line and "resumed>" not in line]
    return execs[1:] + forks


def test_a_pool_that_is_not_asked_for_tools_starts_and_connects_nothing(tmp_path: Path, kestrel_home: Path) -> None:
    _configure(kestrel_home)
    log = _trace([sys.executable, "-c", POOL_WITHOUT_A_CALL], tmp_path, kestrel_home)
    assert findings(log) == []
    assert _started_processes(log) == []


def test_the_trace_sees_a_started_server(tmp_path: Path, kestrel_home: Path) -> None:
    """The check above can fail: asking for the tools starts the server, and the trace shows it."""
    _configure(kestrel_home)
    code = POOL_WITHOUT_A_CALL.replace(
        "asyncio.run(pool.close())",
        "async def use():\n    assert await pool.tools(['time'])\n    await pool.close()\nasyncio.run(use())")
    log = _trace([sys.executable, "-c", code], tmp_path, kestrel_home)
    assert any("mcp_server_time" in line and "execve(" in line for line in _started_processes(log)), log
