"""Tool use for chats: the tools a chat offers, the user's approval of each call, and running it."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.conversation import Conversation, Message, ToolResultPart
from app.engine.protocol import ToolCall
from app.service.events import Event, Problem, ToolApprovalAsked, ToolApprovalSettled, ToolServersChanged
from app.service.settings_keeper import SettingsKeeper
from app.service.tools.builtin_tools import BUILTIN_SERVER, BuiltinTool
from app.service.tools.tool_room import ResultRoom
from app.tools.choices import ToolChoices, choices_file, read_choices, write_choices
from app.tools.mcp_config import McpServerConfig, read_mcp_config, write_mcp_config
from app.tools.values import ServerStatus, ToolInfo

if TYPE_CHECKING:
    from app.tools.pool import McpPool

DENIED = "The user did not allow this tool to run. Answer without its result, or ask the user."


class ToolDecision(StrEnum):
    ALLOW_ONCE = "once"
    ALWAYS = "always"  # this server's tool, from now on (taken back in Settings)
    DENY = "deny"


@dataclass(frozen=True)
class ToolRequest:
    """A call that waits for the user's word."""

    approval_id: int
    conversation_id: int
    message_id: int
    server: str
    tool: str
    arguments: str
    summary: str = ""  # what Kestrel's own tool will do, in words (ToolApprovalAsked.summary)


Approver = Callable[[ToolRequest], Awaitable[ToolDecision]]


class ToolUse:
    """The MCP servers (mcp.json), the user's per-tool choices, and each call's approval.

    Servers start when a chat that offers their tools is answered (McpPool), never at
    start-up. Nothing runs unasked: a call runs after the user allows it (once, or always
    for that server's tool), through `approver` when a front end gives one (the CLI asks
    on the terminal), otherwise by ToolApprovalAsked and `answer()` (the window). A tool's
    result is data for the model: it cannot change settings, approvals or tools, since
    nothing here reads it. Kestrel's own tools (add_builtin: memory's remember) are offered
    beside the servers', asked the same way, and run here instead of by a server.
    """

    def __init__(self, mcp_file: Path | None, keeper: SettingsKeeper, emit: Callable[[Event], None], *,
                 approver: Approver | None = None) -> None:
        self._file, self._emit, self._keeper = mcp_file, emit, keeper
        self._servers: list[McpServerConfig] = []
        self.choices = ToolChoices()
        self._pool: McpPool | None = None
        self.approver = approver
        self._pending: dict[int, asyncio.Future[ToolDecision]] = {}
        self._ids = itertools.count(1)
        self._builtins: list[BuiltinTool] = []

    @property
    def pool(self) -> McpPool:
        """The running servers; made on first use (the MCP SDK takes most of a second to import,
        which a chat without tools, and every other command, never pays)."""
        if self._pool is None:
            from app.tools.pool import McpPool

            # Results come whole: run() cuts each once, to the settings' limit and the context's room.
            self._pool = McpPool(lambda: self._servers, result_limit=lambda: None, on_change=self._pool_changed)
        return self._pool

    def statuses(self) -> list[ServerStatus]:
        """Each server's state, error and last stderr lines (none before the first is started)."""
        return self._pool.status() if self._pool is not None else []

    # --- the servers and the choices ------------------------------------------------------

    def servers(self) -> list[McpServerConfig]:
        """The servers as last read from mcp.json."""
        return list(self._servers)

    async def reload(self) -> list[str]:
        """Read mcp.json and the choices again; the problems found, in plain words."""
        if self._file is None:
            return []
        servers, problems = await asyncio.to_thread(read_mcp_config, self._file)
        choices, more = await asyncio.to_thread(read_choices, choices_file(self._file))
        self._servers, self.choices = servers, choices
        return problems + more

    async def save_servers(self, servers: Sequence[McpServerConfig]) -> bool:
        """Write mcp.json (keys Kestrel does not know are kept); False (said) if the disk refused."""
        if self._file is None:
            return False
        try:
            await asyncio.to_thread(write_mcp_config, self._file, servers)
        except OSError as exc:
            self._emit(Problem(f"Kestrel could not save {self._file}: {exc.strerror or exc}.", "disk"))
            return False
        self._servers = list(servers)
        return True

    async def save_choices(self, choices: ToolChoices) -> bool:
        """Keep which tools are on and which are always allowed; False (said) if the disk refused."""
        self.choices = choices
        if self._file is None:
            return True
        try:
            await asyncio.to_thread(write_choices, choices_file(self._file), choices)
        except OSError as exc:
            self._emit(Problem(f"Kestrel could not save its tool choices: {exc.strerror or exc}.", "disk"))
            return False
        return True

    # --- a chat's tools ---------------------------------------------------------------------

    async def offered(self, names: Collection[str]) -> list[ToolInfo]:
        """The enabled tools of these servers, starting those not running (in a stable order)."""
        problems = await self.reload()
        for problem in problems:
            self._emit(Problem(problem, "other"))
        tools = await self.pool.tools(names)
        return [tool for tool in tools if self.choices.is_enabled(tool.server, tool.name)]

    def add_builtin(self, tool: BuiltinTool) -> None:
        """Offer one of Kestrel's own tools in the chats it says yes to (builtins_for)."""
        self._builtins.append(tool)

    def builtins_for(self, conversation: Conversation, history: Sequence[Message],
                     taken: Collection[str] = ()) -> list[ToolInfo]:
        """Kestrel's own tools this answer offers; one whose name an MCP tool has (`taken`) is left out."""
        return [tool.info for tool in self._builtins
                if tool.info.model_name not in taken and tool.offered(conversation, history)]

    async def run(self, call: ToolCall, tools: Sequence[ToolInfo], *, conversation_id: int,
                  message_id: int, room: ResultRoom | None = None) -> tuple[str, ToolResultPart]:
        """Ask, then run one call: (the server, its result part). Never raises for tool trouble.

        The result is cut to the settings' tool_result_chars and to the room left in the model's
        context (`room`, one per round of calls: ResultRoom.after_round), with a note saying so.
        """
        tool = next((t for t in tools if t.model_name == call.name), None)
        if tool is None:
            return "", ToolResultPart(call.id, f"There is no tool named {call.name!r} here.", is_error=True)
        try:
            arguments: Any = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            return tool.server, ToolResultPart(call.id, "The arguments were not a JSON object.", is_error=True)
        builtin = next((b for b in self._builtins if b.info == tool), None) if tool.server == BUILTIN_SERVER else None
        summary = ""
        if builtin is not None:
            try:
                summary = builtin.summary(arguments)
            except ValueError as exc:  # nothing to ask the person about: the model is told why
                return tool.server, ToolResultPart(call.id, str(exc), is_error=True)
        if not self.choices.is_always_allowed(tool.server, tool.name):
            request = ToolRequest(next(self._ids), conversation_id, message_id, tool.server, tool.name,
                                  json.dumps(arguments, ensure_ascii=False), summary)
            decision = await self._ask(request)
            if decision == ToolDecision.DENY:
                return tool.server, ToolResultPart(call.id, DENIED, denied=True)
            if decision == ToolDecision.ALWAYS:
                await self.save_choices(self.choices.allowing(tool.server, tool.name))
        result = await builtin.run(arguments, conversation_id) if builtin is not None else \
            await self.pool.call(tool, arguments)
        text = await (room or ResultRoom(None)).fit(result.text, self._keeper.settings.tool_result_chars)
        return tool.server, ToolResultPart(call.id, text, is_error=result.is_error)

    async def _ask(self, request: ToolRequest) -> ToolDecision:
        if self.approver is not None:
            return await self.approver(request)
        decided: asyncio.Future[ToolDecision] = asyncio.get_running_loop().create_future()
        self._pending[request.approval_id] = decided
        self._emit(ToolApprovalAsked(request.approval_id, request.conversation_id, request.message_id,
                                     request.server, request.tool, request.arguments, request.summary))
        try:
            return await decided
        finally:
            self._pending.pop(request.approval_id, None)
            self._emit(ToolApprovalSettled(request.approval_id))

    def answer(self, approval_id: int, decision: ToolDecision) -> None:
        """The user's word on a waiting call (an approval already settled is ignored)."""
        decided = self._pending.get(approval_id)
        if decided is not None and not decided.done():
            decided.set_result(ToolDecision(decision))

    def _pool_changed(self) -> None:
        self._emit(ToolServersChanged(tuple(self.statuses())))

    async def close(self) -> None:
        """End every MCP server Kestrel started; waiting approvals are denied."""
        for decided in list(self._pending.values()):
            if not decided.done():
                decided.set_result(ToolDecision.DENY)
        if self._pool is not None:
            await self._pool.close()
