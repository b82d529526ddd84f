"""Tools from MCP servers: mcp.json, the user's per-tool choices, and the pool that runs the servers."""
