"""The pool against real MCP servers: mcp-server-time (PyPI), the filesystem server (npm), Streamable HTTP."""

from __future__ import annotations

import json
from pathlib import Path

from app.tools.mcp_config import McpServerConfig
from app.tools.pool import McpPool, ServerState
from tests.tools.conftest import run, time_server


def test_the_time_server_lists_its_tools_and_tells_the_time_in_a_timezone() -> None:
    async def scenario() -> None:
        pool = McpPool(lambda: [time_server()])
        try:
            tools = await pool.tools(["time"])
            assert [tool.model_name for tool in tools] == ["get_current_time", "convert_time"]
            offered = tools[0].for_model()
            assert offered["type"] == "function"
            assert offered["function"]["name"] == "get_current_time"
            assert "timezone" in offered["function"]["parameters"]["properties"]
            result = await pool.call(tools[0], {"timezone": "Asia/Tokyo"})
            assert not result.is_error and not result.cut
            answer = json.loads(result.text)
            assert answer["timezone"] == "Asia/Tokyo"
            assert answer["datetime"].endswith("+09:00")
            refused = await pool.call(tools[0], {"timezone": "Nowhere/Atlantis"})
            assert refused.is_error and "Nowhere/Atlantis" in refused.text
            assert pool.status()[0].state is ServerState.READY
        finally:
            await pool.close()
        assert pool.status()[0].state is ServerState.STOPPED
    run(scenario())


def test_the_npm_filesystem_server_reads_a_file_in_its_folder(filesystem_server: tuple[McpServerConfig, Path]) -> None:
    config, folder = filesystem_server
    (folder / "notes.txt").write_text("the kestrel hovers\n", encoding="utf-8")

    async def scenario() -> None:
        pool = McpPool(lambda: [config])
        try:
            tools = {tool.name: tool for tool in await pool.tools(["files"])}
            assert {"read_text_file", "list_directory", "write_file"} <= set(tools)
            listing = await pool.call(tools["list_directory"], {"path": str(folder)})
            assert "notes.txt" in listing.text and not listing.is_error
            read = await pool.call(tools["read_text_file"], {"path": str(folder / "notes.txt")})
            assert read.text.strip() == "the kestrel hovers"
            outside = await pool.call(tools["read_text_file"], {"path": "/etc/hostname"})
            assert outside.is_error
        finally:
            await pool.close()
    run(scenario())


def test_a_streamable_http_server_is_reached_with_the_headers_from_mcp_json(http_server: str) -> None:
    servers = [McpServerConfig("calc", url=http_server, headers={"Authorization": "Bearer kestrel-test"}),
               McpServerConfig("calc-no-token", url=http_server)]

    async def scenario() -> None:
        pool = McpPool(lambda: servers, start_timeout=10)
        try:
            tools = await pool.tools(["calc", "calc-no-token"])
            assert [(tool.server, tool.model_name) for tool in tools] == [("calc", "add")]
            result = await pool.call(tools[0], {"a": 2, "b": 40})
            assert (result.text, result.is_error) == ("42", False)
            refused = pool.status()[1]
            assert refused.state is ServerState.FAILED
            assert "calc-no-token" in refused.error and http_server in refused.error
        finally:
            await pool.close()
    run(scenario())
