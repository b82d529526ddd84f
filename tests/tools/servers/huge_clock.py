"""A real MCP server whose get_time answers with 200,000 characters: far more than a small context holds."""

from mcp.server.mcpserver import MCPServer

RESULT_CHARS = 200_000
server = MCPServer("huge clock")


@server.tool()
def get_time(zone: str) -> str:
    """The time in a time zone, followed by a very long report."""
    return f"12:00 in {zone} " + "x" * (RESULT_CHARS - len(f"12:00 in {zone} "))


if __name__ == "__main__":
    server.run()
