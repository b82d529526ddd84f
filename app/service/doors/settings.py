"""The settings' doors: the app's settings (SettingsDoor) and the MCP tools (ToolsDoor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.settings import Settings
from app.tools.choices import ToolChoices

if TYPE_CHECKING:
    from app.service.root import Service


class SettingsDoor:
    """The app's settings as they are, and saving a change (the window's Settings, its theme and
    API server; `kestrel serve` making the server's key): a new device or thread count reloads the
    model, and the engine's pace follows what hidden or background now means."""

    def __init__(self, service: Service) -> None:
        self._keeper = service.keeper
        self.update_settings = service.update_settings

    @property
    def settings(self) -> Settings:
        return self._keeper.settings


class ToolsDoor:
    """The MCP servers (mcp.json) and the user's tool choices, for the Settings' Tools page and
    the chat's settings, and the user's word on a tool call waiting for it (`answer`, after
    ToolApprovalAsked)."""

    def __init__(self, service: Service) -> None:
        tools = service.tools
        self._tools = tools
        self.servers = tools.servers
        self.statuses = tools.statuses
        self.reload = tools.reload
        self.save_servers = tools.save_servers
        self.save_choices = tools.save_choices
        self.answer = tools.answer

    @property
    def choices(self) -> ToolChoices:
        return self._tools.choices
