"""Tools Kestrel itself offers the model (memory's remember), asked and run like an MCP server's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.conversation import Conversation, Message
from app.tools.values import ToolInfo, ToolResult

# The server name Kestrel's own tools go by, in approvals, the tool choices and a turn's parts.
BUILTIN_SERVER = "kestrel"


@dataclass(frozen=True)
class BuiltinTool:
    """One of Kestrel's own tools: `info` as the model is offered it (server BUILTIN_SERVER), for the
    answers `offered` says yes to (the chat, and its messages so far). Before the person is asked, `summary` words what the call will do
    from its arguments ('Remember "…"'), or raises ValueError in words for the model when they will
    not do (then no one is asked). `run` does it, once approved: (arguments, conversation_id)."""

    info: ToolInfo
    offered: Callable[[Conversation, Sequence[Message]], bool]
    summary: Callable[[Mapping[str, Any]], str]
    run: Callable[[Mapping[str, Any], int], Awaitable[ToolResult]]
