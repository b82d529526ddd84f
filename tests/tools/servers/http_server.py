"""A Streamable HTTP MCP server (the SDK's MCPServer) on 127.0.0.1 that wants a bearer token; prints its
port, then serves until it is ended."""

import socket

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN = b"Bearer kestrel-test"
server = MCPServer("http tools")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def wanting_token(app: ASGIApp) -> ASGIApp:
    """Refuse every request without the header mcp.json gives, as a hosted server would."""
    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (b"authorization", TOKEN) not in scope["headers"]:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"no token"})
            return
        await app(scope, receive, send)
    return guarded


async def main() -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    config = uvicorn.Config(wanting_token(server.streamable_http_app()), log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[listener])


if __name__ == "__main__":
    anyio.run(main)
