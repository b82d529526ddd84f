"""Real MCP servers for the pool's tests: Python ones from tests/tools/servers, mcp-server-time from PyPI,
the filesystem server from npm (installed by .ci/run into .cache/npm) and a Streamable HTTP one."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from app.tools.mcp_config import McpServerConfig

ROOT = Path(__file__).resolve().parents[2]
SERVERS = Path(__file__).resolve().parent / "servers"
NPM_PREFIX = ROOT / ".cache" / "npm"
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem"
FILESYSTEM_ENTRY = NPM_PREFIX / "node_modules" / FILESYSTEM_PACKAGE / "dist" / "index.js"
T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    """Run a scenario on a fresh loop, bounded so a hang fails the test instead of the run."""
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


def python_server(name: str, script: str, *args: str) -> McpServerConfig:
    return McpServerConfig(name, command=sys.executable, args=(str(SERVERS / script), *args))


def time_server(name: str = "time") -> McpServerConfig:
    """The real mcp-server-time from PyPI (a test dependency), run by this Python."""
    return McpServerConfig(name, command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC"))


@pytest.fixture
def filesystem_server(tmp_path: Path) -> Iterator[tuple[McpServerConfig, Path]]:
    """The npm filesystem server on a temporary folder; skipped only where Node is not installed."""
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed on this machine (the npm MCP server needs them)")
    if not FILESYSTEM_ENTRY.is_file():
        pytest.fail(f"{FILESYSTEM_PACKAGE} is not installed; run: npm install --prefix .cache/npm "
                    f"{FILESYSTEM_PACKAGE} (.ci/run does this before the tests)")
    folder = tmp_path / "shared folder"
    folder.mkdir()
    yield McpServerConfig("files", command=node, args=(str(FILESYSTEM_ENTRY), str(folder))), folder


@pytest.fixture
def http_server() -> Iterator[str]:
    """The Streamable HTTP server of servers/http_server.py on an ephemeral port; its URL."""
    process = subprocess.Popen([sys.executable, str(SERVERS / "http_server.py")], stdout=subprocess.PIPE,
                               text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    try:
        assert process.stdout is not None
        port = process.stdout.readline().strip()
        assert port.isdigit(), f"the HTTP server did not say its port (exit status {process.poll()})"
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
