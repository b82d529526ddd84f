"""mcp.json: the MCP servers the user trusts, in the format Claude Desktop, Cursor and LM Studio write."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.tools.config_file import ConfigFileTrouble, DamagedJson, parse_json, read_text, write_through

SERVERS_KEY = "mcpServers"
# The keys Kestrel reads and writes for a server; any other key (Cursor's "type", LM Studio's
# notes, a later version's fields) is kept as it was when Kestrel writes the file back.
_KNOWN_KEYS = ("command", "args", "env", "url", "headers", "disabled")
# "type" as Cursor, VS Code and Cline write it; only these name a transport Kestrel speaks.
_STDIO_TYPES = {"stdio"}
_HTTP_TYPES = {"http", "streamable-http", "streamableHttp", "streamable_http"}


@dataclass(frozen=True)
class McpServerConfig:
    """One server: a command to start (stdio) or a URL to reach (Streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True

    @property
    def where(self) -> str:
        """The command line or the URL, as the user would recognise it."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args]).strip()


@dataclass(frozen=True)
class McpFile:
    """What mcp.json holds: its servers, each problem in plain words, and `damage` when the file as a
    whole cannot be used (not valid JSON, not a JSON object, a pipe or a device, too large): then it
    has no servers, and a change would overwrite what the user wrote."""

    servers: tuple[McpServerConfig, ...] = ()
    problems: tuple[str, ...] = ()
    damage: str | None = None
    names: tuple[str, ...] = ()  # every server's name, those Kestrel could not read too


def read_mcp_file(path: Path) -> McpFile:
    """Read the file once, bounded in size and depth, never waiting on a pipe (app/tools/config_file.py)."""
    try:
        text = read_text(path)
    except ConfigFileTrouble as exc:
        return _damaged(str(exc))
    except OSError as exc:
        return _damaged(f"Kestrel could not read {path}: {exc.strerror or exc}. "
                        "Check that the file is there and that you may read it.")
    if text is None:
        return McpFile()
    try:
        data = parse_json(text) if text.strip() else {}
    except DamagedJson as exc:
        return _damaged(f"{path} is not valid JSON ({exc}). Fix it in a text editor, or remove it to start again; "
                        "no tools were loaded.")
    if not isinstance(data, dict):
        return _damaged(f"{path} must hold a JSON object with \"{SERVERS_KEY}\" in it; no tools were loaded.")
    servers = data.get(SERVERS_KEY, {})
    if not isinstance(servers, dict):
        return _damaged(f"\"{SERVERS_KEY}\" in {path} must be an object of servers by name; no tools were loaded.")
    found: list[McpServerConfig] = []
    problems: list[str] = []
    for name, entry in servers.items():
        server, problem = _server(name, entry)
        if server is not None:
            found.append(server)
        if problem:
            problems.append(problem)
    return McpFile(tuple(found), tuple(problems), None, tuple(servers))


def read_mcp_config(path: Path) -> tuple[list[McpServerConfig], list[str]]:
    """The servers in the file, in its order, and each problem in plain words (a bad server is left out)."""
    found = read_mcp_file(path)
    return list(found.servers), list(found.problems)


def write_mcp_config(path: Path, servers: Sequence[McpServerConfig], *, drop: Collection[str] = ()) -> None:
    """Write the servers in their order, keeping every key Kestrel does not know, in the file and per server.

    An entry Kestrel could not read (another app's transport, a typo) is kept as it is after them, so a
    file shared with Cursor or Claude Desktop loses nothing; `drop` names entries to remove all the same.
    A link is written through to its target (config_file.write_through); a pipe, a device or a file too
    large to read is never replaced (ConfigFileTrouble, an OSError, says so).
    """
    data = _existing_object(path)
    old_servers = data.get(SERVERS_KEY)
    old = old_servers if isinstance(old_servers, dict) else {}
    new: dict[str, Any] = {}
    for server in servers:
        previous = old.get(server.name)
        entry = {key: value for key, value in previous.items() if key not in _KNOWN_KEYS} \
            if isinstance(previous, dict) else {}
        entry.update(_entry(server))
        new[server.name] = entry
    for name, entry in old.items():
        if name not in new and name not in drop and _server(name, entry)[0] is None:
            new[name] = entry
    data[SERVERS_KEY] = new
    write_mcp_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def read_mcp_text(path: Path) -> str:
    """The file's text as the user wrote it ("" when there is none), for editing it by hand;
    ConfigFileTrouble (an OSError) for a pipe, a device or a file too large, as read_mcp_file says."""
    return read_text(path) or ""


def write_mcp_text(path: Path, text: str) -> None:
    """Write the whole file; through a link to its target, as write_mcp_config does."""
    write_through(path, text.encode("utf-8"))


def config_names(path: Path) -> list[str]:
    """Every server name in the file, the ones Kestrel could not read too (for `remove` and name clashes)."""
    return list(read_mcp_file(path).names)


def _damaged(words: str) -> McpFile:
    return McpFile(problems=(words,), damage=words)


def _existing_object(path: Path) -> dict[str, Any]:
    """The file's object as it is, or a new one: a file that is not valid JSON or not an object is
    replaced, but one Kestrel must not read (a pipe, a device, too large) is refused."""
    try:
        text = read_text(path)
    except ConfigFileTrouble:
        raise
    except OSError:
        return {}
    try:
        data = parse_json(text) if text else {}
    except DamagedJson:
        return {}
    return data if isinstance(data, dict) else {}


def _entry(server: McpServerConfig) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if server.url is not None:
        entry["url"] = server.url
        if server.headers:
            entry["headers"] = dict(server.headers)
    else:
        entry["command"] = server.command
        entry["args"] = list(server.args)
        if server.env:
            entry["env"] = dict(server.env)
    if not server.enabled:
        entry["disabled"] = True
    return entry


def _server(name: str, entry: object) -> tuple[McpServerConfig | None, str]:
    """The server an entry describes, or None and why not."""
    where = f"The MCP server \"{name}\" in mcp.json"
    if not name.strip():
        return None, "A server in mcp.json has an empty name; give it a name."
    if not isinstance(entry, dict):
        return None, f"{where} must be an object with \"command\" or \"url\"; it was left out."
    kind = entry.get("type")
    command, url = entry.get("command"), entry.get("url")
    if kind is not None and kind not in _STDIO_TYPES | _HTTP_TYPES:
        return None, (f"{where} uses the \"{kind}\" transport, which Kestrel does not speak; give it a "
                      "\"command\" (stdio) or a Streamable HTTP \"url\". It was left out.")
    if (command is None) == (url is None):
        return None, f"{where} needs either \"command\" (a program to start) or \"url\" (a Streamable HTTP address); it was left out."
    disabled = entry.get("disabled", False)
    if not isinstance(disabled, bool):
        return None, f"{where} has \"disabled\": {json.dumps(disabled)}; it must be true or false. It was left out."
    if url is not None:
        headers = _strings(entry.get("headers", {}))
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            return None, f"{where} has \"url\": {json.dumps(url)}; it must be an http:// or https:// address. It was left out."
        if headers is None:
            return None, f"{where} has \"headers\" that are not an object of text values; it was left out."
        return McpServerConfig(name, url=url, headers=headers, enabled=not disabled), ""
    args, env = entry.get("args", []), _strings(entry.get("env", {}))
    if not isinstance(command, str) or not command.strip():
        return None, f"{where} has \"command\": {json.dumps(command)}; it must be the program to start. It was left out."
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        return None, f"{where} has \"args\" that are not a list of text; it was left out."
    if env is None:
        return None, f"{where} has \"env\" that is not an object of text values; it was left out."
    return McpServerConfig(name, command=command, args=tuple(args), env=env, enabled=not disabled), ""


def _strings(value: object) -> dict[str, str] | None:
    """A mapping of text to text, or None when the value is not one."""
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return None
    return dict(value)
