"""The values app.tools hands the layers above: tools, server states, results. No SDK import here, so
the window and the CLI can name them without loading the MCP SDK (most of a second)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ServerState(StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True)
class ListedTool:
    """One tool as its server listed it."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class ToolInfo:
    """A tool as the model is offered it."""

    server: str
    name: str
    model_name: str
    description: str
    parameters: Mapping[str, Any]

    def for_model(self) -> dict[str, Any]:
        """The transformers/OpenAI shape chat templates take in `tools=[...]`."""
        return {"type": "function",
                "function": {"name": self.model_name, "description": self.description,
                             "parameters": dict(self.parameters)}}


@dataclass(frozen=True)
class ServerStatus:
    """What the Settings page and `kestrel tools list` show for one server."""

    name: str
    state: ServerState
    error: str
    stderr_tail: tuple[str, ...]
    tools: tuple[ToolInfo, ...]


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool
    cut: bool
