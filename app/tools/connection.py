"""One MCP server's whole life (start, listing, calls, stop) inside one asyncio task of its own.

The SDK's transports and ClientSession are anyio context managers built on task groups: a cancel
scope entered in one task and left in another raises. So the task that enters them is the only
one that leaves them; other tasks hand it calls through a queue and end it by cancelling the
anyio scope it runs in (never task.cancel(), which the SDK's shielded shutdown cannot stand).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from app.core.children.commands import CommandChild
from app.tools.mcp_config import McpServerConfig
from app.tools.processes import TOKEN_VARIABLE, StderrTail, find_command
from app.tools.results import result_text
from app.tools.values import ListedTool, ServerState

# The SDK logs each bad stdout line with its traceback; with no handler of Kestrel's, Python's last-resort
# handler would print those on the terminal of `kestrel chat` and `tools list --check`. Kestrel says what
# went wrong in the server's status instead (a handler the app adds to the root logger still gets them).
logging.getLogger("mcp").addHandler(logging.NullHandler())

# How long a server that broke the connection gets to answer a ping before it counts as gone.
_PING_S = 2.0
# Bad stdout lines quoted in the error: enough to recognise, never the whole flood.
_BAD_LINES_KEPT = 3


class ServerTrouble(Exception):
    """A server could not be used; the message says so in plain words."""


@dataclass
class _Call:
    """A call waiting for the server's task; the caller awaits `future`."""

    name: str
    arguments: dict[str, Any]
    timeout: float
    future: asyncio.Future[tuple[str, bool]]
    scope: anyio.CancelScope | None = None

    def answer(self, text: str, is_error: bool) -> None:
        if not self.future.done():
            self.future.set_result((text, is_error))

    def abandon(self) -> None:
        """The caller stopped waiting (the user stopped the answer): stop the request too."""
        if self.scope is not None:
            self.scope.cancel()


class ServerConnection:
    """A started server. Create it inside the running loop; it starts at once, in its own task."""

    def __init__(self, config: McpServerConfig, *, start_timeout: float, on_change: Callable[[], None]) -> None:
        self.config = config
        self.state = ServerState.STARTING
        self.error = ""
        self.tools: tuple[ListedTool, ...] = ()
        self.was_ready = False
        self.failed_at = math.inf  # time.monotonic() when it failed
        self._start_timeout = start_timeout
        self._on_change = on_change
        self._stderr: StderrTail | None = None
        self._child = CommandChild(TOKEN_VARIABLE)  # a stdio server's process, its group and cgroup
        self._bad_lines: list[str] = []
        self._calls: asyncio.Queue[_Call] = asyncio.Queue()
        self._settled = asyncio.Event()
        self._scope = anyio.CancelScope()
        self._closing = False
        self._task = asyncio.get_running_loop().create_task(self._life(), name=f"MCP server {config.name}")

    def stderr_tail(self) -> tuple[str, ...]:
        return self._stderr.lines() if self._stderr is not None else ()

    async def started(self) -> None:
        """Wait until the server is ready or has failed."""
        await self._settled.wait()

    async def call(self, name: str, arguments: Mapping[str, Any], timeout: float) -> tuple[str, bool]:
        """The tool's result text and whether it is an error; trouble of any kind is an error, never raised."""
        if self.state is not ServerState.READY:
            return f"The MCP server \"{self.config.name}\" is not running ({self.error or self.state}).", True
        call = _Call(name, dict(arguments), timeout, asyncio.get_running_loop().create_future())
        self._calls.put_nowait(call)
        try:
            return await call.future
        except asyncio.CancelledError:
            call.abandon()
            raise

    async def close(self) -> None:
        """End the server (and, through the SDK, its process group or Windows job) and wait for it."""
        self._closing = True
        self._scope.cancel()
        # asyncio.wait, not `await self._task`: cancelling this caller must not cancel the task natively.
        await asyncio.wait([self._task])

    async def _life(self) -> None:
        try:
            with self._scope:
                self._scope.deadline = anyio.current_time() + self._start_timeout
                async with AsyncExitStack() as stack:
                    session = await self._open(stack)
                    await session.initialize()
                    self.tools = await _listed_tools(session)
                    self._scope.deadline = math.inf
                    self._become(ServerState.READY)
                    self.was_ready = True
                    await self._serve(session)
            if not self._closing:
                await self._settle_stderr()
            self._ended_quietly()
        except Exception as exc:  # whatever the SDK, the network or the server raise: the server failed
            await self._settle_stderr()
            self._fail(self._words(exc))
        finally:
            self._child.end_group()
            self._answer_waiting_calls()
            self._settled.set()
            await asyncio.to_thread(self._child.end_cgroup)

    async def _open(self, stack: AsyncExitStack) -> ClientSession:
        config = self.config
        if config.url is not None:
            client = await stack.enter_async_context(create_mcp_http_client(headers=dict(config.headers) or None))
            read, write = await stack.enter_async_context(streamable_http_client(config.url, http_client=client))
        else:
            assert config.command is not None
            if find_command(config.command, config.env) is None:
                raise ServerTrouble(f"Kestrel could not find the command \"{config.command}\" of the MCP server "
                                    f"\"{config.name}\". Check that it is installed and on your PATH, or give its "
                                    "full path in mcp.json.")
            command, args = self._child.command_line(config.command, config.args)
            self._stderr = StderrTail()
            params = StdioServerParameters(command=command, args=args, env={**config.env, **self._child.environment})
            try:
                read, write = await stack.enter_async_context(stdio_client(params, errlog=self._stderr.writer))
            finally:
                self._stderr.close_writer()
            self._child.started()
        return await stack.enter_async_context(ClientSession(read, write, message_handler=self._on_message))

    async def _serve(self, session: ClientSession) -> None:
        """Answer calls until the server is closed or its connection breaks."""
        async with anyio.create_task_group() as group:
            while True:
                call = await self._calls.get()
                group.start_soon(self._answer, session, call, group.cancel_scope)

    async def _answer(self, session: ClientSession, call: _Call, serving: anyio.CancelScope) -> None:
        try:
            await self._run_call(session, call, serving)
        finally:  # closed or broken mid-call: the caller still gets an answer (no-op once answered)
            call.answer(f"The MCP server \"{self.config.name}\" stopped before \"{call.name}\" finished.", True)

    async def _run_call(self, session: ClientSession, call: _Call, serving: anyio.CancelScope) -> None:
        if call.future.done():
            return
        where = f"the tool \"{call.name}\" of the MCP server \"{self.config.name}\""
        with anyio.CancelScope() as call.scope:
            try:
                with anyio.fail_after(call.timeout):
                    result = await session.call_tool(call.name, call.arguments)
            except TimeoutError:
                call.answer(f"Kestrel stopped waiting for {where} after {call.timeout:g} s.", True)
                return
            except Exception as exc:  # the server's error answer, a broken connection, a bad result
                if not await _answers_ping(session):
                    # Failed before the call is answered, so the caller sees the state and its stderr.
                    await self._settle_stderr()
                    self._fail(f"The MCP server \"{self.config.name}\" stopped answering: {_exception_words(exc)}")
                    serving.cancel()
                call.answer(f"{where[0].upper()}{where[1:]} failed: {_exception_words(exc)}", True)
                return
        if call.scope.cancelled_caught:
            call.answer(f"The call to {where} was stopped.", True)
        elif isinstance(result, types.CallToolResult):
            call.answer(result_text(result), result.is_error)
        else:
            call.answer(f"{where[0].upper()}{where[1:]} gave an answer Kestrel does not know how to read.", True)

    async def _on_message(self, message: IncomingMessage) -> None:
        """The transport hands over what it could not read (a bad stdout line) as an exception."""
        if isinstance(message, Exception) and len(self._bad_lines) < _BAD_LINES_KEPT:
            self._bad_lines.append(_bad_line(message)[:200])
        await anyio.lowlevel.checkpoint()

    def _ended_quietly(self) -> None:
        """Out of the scope without an exception: closed, out of start time, or its connection broke."""
        if self._closing:
            self._become(ServerState.STOPPED)
        elif self.state is ServerState.STARTING:
            self._fail(f"The MCP server \"{self.config.name}\" did not finish starting within "
                       f"{self._start_timeout:g} s, so Kestrel stopped it. Check that "
                       f"\"{self.config.where}\" works on its own{self._bad_output()}.")
        else:
            self._fail(self.error or f"The MCP server \"{self.config.name}\" stopped.")

    def _words(self, exc: Exception) -> str:
        if isinstance(exc, ServerTrouble):
            return str(exc)
        leaf = _leaf(exc)
        if isinstance(leaf, OSError) and self.config.url is None:
            return (f"Kestrel could not start the MCP server \"{self.config.name}\" ({self.config.where}): "
                    f"{leaf.strerror or leaf}. Check the command in mcp.json.")
        if self.config.url is not None:
            return (f"Kestrel could not use the MCP server \"{self.config.name}\" at {self.config.url}: "
                    f"{_exception_words(leaf)}. Check that the server is running and the address and "
                    "headers in mcp.json are right.")
        return (f"The MCP server \"{self.config.name}\" stopped before it finished starting "
                f"({_exception_words(leaf)}). Check that \"{self.config.where}\" runs on its own in a "
                f"terminal; its last lines on stderr may say why{self._bad_output()}.")

    def _bad_output(self) -> str:
        if not self._bad_lines:
            return ""
        return f"; it wrote lines on stdout that are not MCP messages, such as: {self._bad_lines[0]}"

    async def _settle_stderr(self) -> None:
        if self._stderr is not None:
            await self._stderr.settled()

    def _fail(self, error: str) -> None:
        self.error = error
        self.failed_at = time.monotonic()
        self._become(ServerState.FAILED)

    def _become(self, state: ServerState) -> None:
        self.state = state
        if state is not ServerState.STARTING:
            self._settled.set()
        self._on_change()

    def _answer_waiting_calls(self) -> None:
        while not self._calls.empty():
            self._calls.get_nowait().answer(
                f"The MCP server \"{self.config.name}\" stopped before it ran this call.", True)


async def _listed_tools(session: ClientSession) -> tuple[ListedTool, ...]:
    """Every tool, page by page, in the server's own order."""
    tools: list[ListedTool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(ListedTool(tool.name, tool.description or "", dict(tool.input_schema)) for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tuple(tools)


async def _answers_ping(session: ClientSession) -> bool:
    try:
        with anyio.fail_after(_PING_S):
            await session.send_ping()
    except Exception:  # any failure means the same: the connection is gone
        return False
    return True


def _bad_line(exc: Exception) -> str:
    """The line a server wrote, where the SDK's parse error keeps it (pydantic's input), else the error."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            found = errors()
        except Exception:  # not pydantic's errors() after all
            found = None
        if isinstance(found, list) and found and isinstance(found[0], dict) and isinstance(found[0].get("input"), str):
            return repr(found[0]["input"])
    return _exception_words(exc)


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside the task groups' exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _exception_words(exc: BaseException) -> str:
    leaf = _leaf(exc)
    message = getattr(leaf, "message", None) or str(leaf)
    return message if message else type(leaf).__name__
