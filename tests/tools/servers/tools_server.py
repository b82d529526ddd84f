"""A real MCP server (the SDK's MCPServer, once FastMCP) whose tools misbehave on purpose.

With --child it starts a grandchild at once (a `sleep`), as servers run through npx or uv do, so
the tests can see that closing the pool ends the whole tree.
"""

import base64
import subprocess
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp_types import ImageContent, TextContent
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("hostile tools")
CHILD = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]) if "--child" in sys.argv else None


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def boom() -> str:
    """Crashes (the SDK keeps a crash's own words on the server)."""
    raise ValueError("a secret stack trace")


@server.tool()
def refuse() -> str:
    """Fails on purpose, with words for the model."""
    raise ToolError("the disk is on fire")


@server.tool()
def big() -> str:
    """Ten megabytes of text."""
    return "x" * 10_000_000


@server.tool()
def picture() -> list[TextContent | ImageContent]:
    """A caption and a PNG."""
    png = base64.b64encode(b"\x89PNG" + b"\0" * 11_996).decode("ascii")
    return [TextContent(text="a tiny picture"), ImageContent(data=png, mime_type="image/png")]


@server.tool()
def slow(seconds: float) -> str:
    """Takes its time."""
    time.sleep(seconds)
    return "done"


@server.tool()
def child_pid() -> int:
    """The pid of the grandchild started with --child."""
    return CHILD.pid if CHILD is not None else 0


@server.tool()
def arguments() -> str:
    """The command-line arguments this server was started with."""
    return " ".join(sys.argv[1:])


@server.tool()
def crash() -> str:
    """Ends the server in the middle of the call."""
    sys.stderr.write("crashing now\n")
    sys.stderr.flush()
    import os

    os._exit(9)


if __name__ == "__main__":
    server.run()
