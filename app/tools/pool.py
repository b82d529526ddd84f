"""The MCP servers a chat may use: started on first use, in parallel, listed in a stable order, all ended on close."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from app.tools.connection import ServerConnection
from app.tools.mcp_config import McpServerConfig
from app.tools.results import cut_to
from app.tools.values import ListedTool, ServerState, ServerStatus, ToolInfo, ToolResult

__all__ = ["McpPool", "ServerState", "ServerStatus", "ToolInfo", "ToolResult"]

# What OpenAI-style function names allow, which every chat template accepts.
_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]")
_NAME_LIMIT = 64


class McpPool:
    """Owns the server connections; used from one asyncio loop (the app's) only."""

    def __init__(self, servers: Callable[[], Sequence[McpServerConfig]], *, start_timeout: float = 30.0,
                 call_timeout: float = 120.0, result_limit: Callable[[], int | None] = lambda: 64_000,
                 on_change: Callable[[], None] = lambda: None, retry_after: float = 60.0) -> None:
        """`retry_after`: a server that failed to start is tried again at most this often, so one that hangs
        does not hold up every answer by `start_timeout`; one that was running and broke is retried at once.
        `result_limit`: the most characters of a result `call` gives back (None: all of them, for a caller
        that cuts it itself, as ToolUse does to fit the model's context)."""
        self._servers = servers
        self._start_timeout = start_timeout
        self._call_timeout = call_timeout
        self._result_limit = result_limit
        self._on_change = on_change
        self._retry_after = retry_after
        self._connections: dict[str, ServerConnection] = {}
        # The last tools each server listed, kept across restarts: model names stay the same.
        self._known: dict[str, tuple[ListedTool, ...]] = {}

    async def tools(self, names: Collection[str]) -> list[ToolInfo]:
        """The tools of the named enabled servers, starting those not running; a failed one is left out."""
        configs = [config for config in self._servers() if config.name in names and config.enabled]
        await self._stop_changed()
        for config in configs:
            if self._should_start(config):
                self._connections[config.name] = ServerConnection(
                    config, start_timeout=self._start_timeout, on_change=self._on_change)
        await asyncio.gather(*(self._connections[config.name].started() for config in configs
                               if config.name in self._connections))
        for config in configs:
            connection = self._connections.get(config.name)
            if connection is not None and connection.state is ServerState.READY:
                self._known[config.name] = connection.tools
        infos = self._infos(configs)
        return [tool for config in configs if self._state(config.name) is ServerState.READY
                for tool in infos[config.name]]

    async def call(self, tool: ToolInfo, arguments: Mapping[str, Any]) -> ToolResult:
        """Run a tool; whatever goes wrong comes back as an error result in plain words, never raised."""
        connection = self._connections.get(tool.server)
        if connection is None:
            return ToolResult(f"The MCP server \"{tool.server}\" is not running.", True, False)
        text, is_error = await connection.call(tool.name, arguments, self._call_timeout)
        text, cut = cut_to(text, self._result_limit())
        return ToolResult(text, is_error, cut)

    def status(self) -> list[ServerStatus]:
        """Every configured server in the file's order, started or not."""
        configs = list(self._servers())
        infos = self._infos(configs)
        statuses = []
        for config in configs:
            connection = self._connections.get(config.name)
            if connection is None:
                statuses.append(ServerStatus(config.name, ServerState.STOPPED, "", (), infos[config.name]))
            else:
                statuses.append(ServerStatus(config.name, connection.state, connection.error,
                                             connection.stderr_tail(), infos[config.name]))
        return statuses

    async def close(self) -> None:
        """End every server and wait for them all; the pool can start them again later."""
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(connection.close() for connection in connections))

    async def _stop_changed(self) -> None:
        """A server whose entry was edited, disabled or removed is stopped before it is used again."""
        wanted = {config.name: config for config in self._servers() if config.enabled}
        stale = [name for name, connection in self._connections.items() if wanted.get(name) != connection.config]
        await asyncio.gather(*(self._connections.pop(name).close() for name in stale))

    def _should_start(self, config: McpServerConfig) -> bool:
        connection = self._connections.get(config.name)
        if connection is None or connection.state is ServerState.STOPPED:
            return True
        if connection.state is not ServerState.FAILED:
            return False
        return connection.was_ready or time.monotonic() - connection.failed_at >= self._retry_after

    def _state(self, name: str) -> ServerState:
        connection = self._connections.get(name)
        return connection.state if connection is not None else ServerState.STOPPED

    def _infos(self, configs: Sequence[McpServerConfig]) -> dict[str, tuple[ToolInfo, ...]]:
        """Each server's tools, named for the model over all the servers given, so names do not depend on
        which of them happen to be running."""
        listed = [(config.name, tool) for config in configs
                  for tool in (self._live_tools(config.name) or self._known.get(config.name, ()))]
        names = model_names([(server, tool.name) for server, tool in listed])
        infos: dict[str, list[ToolInfo]] = {config.name: [] for config in configs}
        for (server, tool), model_name in zip(listed, names):
            infos[server].append(ToolInfo(server, tool.name, model_name, tool.description, tool.parameters))
        return {server: tuple(tools) for server, tools in infos.items()}

    def _live_tools(self, name: str) -> tuple[ListedTool, ...]:
        connection = self._connections.get(name)
        return connection.tools if connection is not None and connection.state is ServerState.READY else ()


def model_names(tools: Sequence[tuple[str, str]]) -> list[str]:
    """The name the model sees for each (server, tool): the tool's own, or `server__tool` where two servers
    share it; only letters, digits, _ and -, at most 64 characters, and never two alike."""
    counts: dict[str, int] = {}
    for _, tool in tools:
        counts[_safe(tool)] = counts.get(_safe(tool), 0) + 1
    taken: set[str] = set()
    names = []
    for server, tool in tools:
        name = _safe(tool) if counts[_safe(tool)] == 1 else _safe(f"{server}__{tool}")
        unique, number = name, 2
        while unique in taken:
            suffix = f"_{number}"
            unique, number = name[:_NAME_LIMIT - len(suffix)] + suffix, number + 1
        taken.add(unique)
        names.append(unique)
    return names


def _safe(name: str) -> str:
    return (_NAME_CHARACTERS.sub("_", name) or "tool")[:_NAME_LIMIT]
