"""Settings: the app's and a chat's, the API server and Tools pages, mcp.json."""
