"""A real MCP server (the SDK's MCPServer) with one well-behaved tool: the time in a zone, always noon."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("clock")


@server.tool()
def get_time(zone: str) -> str:
    """The time in a time zone."""
    return f"12:00 in {zone}"


if __name__ == "__main__":
    server.run()
