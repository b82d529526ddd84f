"""An MCP server whose get_time waits for the test: it leaves `called` in its folder, then
answers once `go` is there (at most a minute), so a test can act while the call runs."""

import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

FOLDER = Path(sys.argv[1])
server = MCPServer("clock")


@server.tool()
def get_time(zone: str) -> str:
    """The time in a time zone."""
    (FOLDER / "called").touch()
    deadline = time.monotonic() + 60
    while not (FOLDER / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return f"12:00 in {zone}"


if __name__ == "__main__":
    server.run()
