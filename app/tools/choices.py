"""tool_choices.json beside mcp.json: which tools the user turned off and which may run without asking."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from app.core.files import write_atomically
from app.tools.config_file import DamagedJson, parse_json, read_text

CHOICES_NAME = "tool_choices.json"
FORMAT_VERSION = 1
ToolKey = tuple[str, str]  # (server, tool), the tool's own name on its server


def choices_file(mcp_file: Path) -> Path:
    """The choices live beside mcp.json, in their own file, so mcp.json stays as other apps write it."""
    return mcp_file.with_name(CHOICES_NAME)


@dataclass(frozen=True)
class ToolChoices:
    """Per (server, tool): turned off, and "always allow" (run without asking each time)."""

    disabled_tools: frozenset[ToolKey] = frozenset()
    always_allowed: frozenset[ToolKey] = frozenset()

    def is_enabled(self, server: str, tool: str) -> bool:
        return (server, tool) not in self.disabled_tools

    def is_always_allowed(self, server: str, tool: str) -> bool:
        return (server, tool) in self.always_allowed

    def enabling(self, server: str, tool: str) -> ToolChoices:
        return replace(self, disabled_tools=self.disabled_tools - {(server, tool)})

    def disabling(self, server: str, tool: str) -> ToolChoices:
        return replace(self, disabled_tools=self.disabled_tools | {(server, tool)})

    def allowing(self, server: str, tool: str) -> ToolChoices:
        """The user chose "Always allow this tool"."""
        return replace(self, always_allowed=self.always_allowed | {(server, tool)})

    def revoking(self, server: str, tool: str) -> ToolChoices:
        """The user took an "always allow" back: the tool asks again."""
        return replace(self, always_allowed=self.always_allowed - {(server, tool)})

    def forgetting_server(self, server: str) -> ToolChoices:
        """Nothing is kept for a server the user removed, so a new one of that name starts asking again."""
        return ToolChoices(frozenset(key for key in self.disabled_tools if key[0] != server),
                           frozenset(key for key in self.always_allowed if key[0] != server))


def read_choices(path: Path) -> tuple[ToolChoices, list[str]]:
    """The choices in the file and each problem in plain words; a bad file gives no choices, so every call asks."""
    try:
        text = read_text(path)  # bounded, and never waiting on a pipe put in its place
        if text is None:
            return ToolChoices(), []
        data = parse_json(text)
    except (OSError, DamagedJson) as exc:
        return ToolChoices(), [f"Kestrel could not read the tool choices in {path} ({exc}); every tool is on "
                               "and asks before it runs until the choices are made again."]
    if not isinstance(data, dict):
        return ToolChoices(), [f"{path} must hold a JSON object; every tool is on and asks before it runs."]
    if isinstance(data.get("version"), int) and data["version"] > FORMAT_VERSION:
        return ToolChoices(), [f"{path} was written by a newer Kestrel; every tool is on and asks before it runs."]
    disabled, bad_disabled = _keys(data.get("disabled", []))
    allowed, bad_allowed = _keys(data.get("always_allow", []))
    problems = [f"Some entries in {path} are not [server, tool] pairs and were left out."] \
        if bad_disabled or bad_allowed else []
    return ToolChoices(disabled, allowed), problems


def write_choices(path: Path, choices: ToolChoices) -> None:
    data = {"version": FORMAT_VERSION,
            "disabled": [list(key) for key in sorted(choices.disabled_tools)],
            "always_allow": [list(key) for key in sorted(choices.always_allowed)]}
    write_atomically(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def _keys(value: object) -> tuple[frozenset[ToolKey], bool]:
    """The (server, tool) pairs in a JSON list, and whether any entry was not one."""
    if not isinstance(value, list):
        return frozenset(), True
    keys = [(item[0], item[1]) for item in value
            if isinstance(item, list) and len(item) == 2 and all(isinstance(part, str) for part in item)]
    return frozenset(keys), len(keys) != len(value)
