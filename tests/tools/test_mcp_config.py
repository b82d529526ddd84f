"""mcp.json as Claude Desktop, Cursor and LM Studio write it: read, written back with unknown keys kept,
and every mistake a problem in plain words, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from app.core.paths import data_paths
from app.tools.config_file import DEPTH_LIMIT
from app.tools.mcp_config import McpFile, McpServerConfig, config_names, read_mcp_config, read_mcp_file, write_mcp_config

# Claude Desktop's example (modelcontextprotocol.io, "Connect to local MCP servers"), plus a Streamable
# HTTP server as Cursor writes one, a disabled one as Cline writes it, and keys Kestrel does not know.
CLAUDE_DESKTOP = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/username/Desktop",
                     "/Users/username/Downloads"],
        },
        "time": {"command": "uvx", "args": ["mcp-server-time", "--local-timezone=Europe/Paris"],
                 "env": {"TZ": "Europe/Paris"}, "autoApprove": ["get_current_time"]},
        "remote": {"type": "http", "url": "https://mcp.example.com/mcp",
                   "headers": {"Authorization": "Bearer abc"}},
        "off": {"command": "old-server", "disabled": True},
    },
    "globalShortcut": "Ctrl+Space",
}


def test_the_file_lives_in_kestrels_config_folder() -> None:
    paths = data_paths()
    assert paths.mcp_file == paths.config / "mcp.json"


def test_a_claude_desktop_file_is_read_in_its_order(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(CLAUDE_DESKTOP), encoding="utf-8")
    servers, problems = read_mcp_config(path)
    assert problems == []
    assert [server.name for server in servers] == ["filesystem", "time", "remote", "off"]
    assert servers[0] == McpServerConfig("filesystem", command="npx", args=(
        "-y", "@modelcontextprotocol/server-filesystem", "/Users/username/Desktop", "/Users/username/Downloads"))
    assert servers[1].env == {"TZ": "Europe/Paris"}
    assert servers[2] == McpServerConfig("remote", url="https://mcp.example.com/mcp",
                                         headers={"Authorization": "Bearer abc"})
    assert servers[3].enabled is False
    assert servers[2].where == "https://mcp.example.com/mcp" and servers[1].where.startswith("uvx mcp-server-time")


def test_writing_keeps_the_keys_kestrel_does_not_know(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(CLAUDE_DESKTOP), encoding="utf-8")
    servers, _ = read_mcp_config(path)
    changed = [servers[1].__class__(servers[1].name, command="uvx", args=("mcp-server-time",), enabled=False),
               servers[2], McpServerConfig("new", command="python", args=("-m", "server"))]
    write_mcp_config(path, changed)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["globalShortcut"] == "Ctrl+Space"
    assert list(data["mcpServers"]) == ["time", "remote", "new"]
    assert data["mcpServers"]["time"] == {"autoApprove": ["get_current_time"], "command": "uvx",
                                          "args": ["mcp-server-time"], "disabled": True}
    assert data["mcpServers"]["remote"]["type"] == "http"
    assert read_mcp_config(path) == (changed, [])


def test_a_missing_file_is_no_servers_and_no_problem(tmp_path: Path) -> None:
    assert read_mcp_config(tmp_path / "mcp.json") == ([], [])


def test_bad_json_is_a_problem_naming_the_place(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {"time": {"command": "uvx",}}}', encoding="utf-8")
    servers, problems = read_mcp_config(path)
    assert servers == []
    assert len(problems) == 1 and "not valid JSON" in problems[0] and "line 1" in problems[0]


def test_each_bad_entry_is_left_out_with_its_reason_and_the_rest_are_read(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "good": {"command": "server"},
        "neither": {"args": ["x"]},
        "both": {"command": "a", "url": "http://b"},
        "sse": {"type": "sse", "url": "http://localhost:9000/sse"},
        "args": {"command": "a", "args": "not a list"},
        "env": {"command": "a", "env": {"PORT": 8080}},
        "url": {"url": "ftp://example.com"},
        "flag": {"command": "a", "disabled": "yes"},
        "list": ["command"],
    }}), encoding="utf-8")
    servers, problems = read_mcp_config(path)
    assert [server.name for server in servers] == ["good"]
    assert len(problems) == 8
    for name, words in [("neither", "needs either"), ("both", "needs either"), ("sse", '"sse" transport'),
                        ("args", "list of text"), ("env", "object of text"), ("url", "http:// or https://"),
                        ("flag", "true or false"), ("list", "must be an object")]:
        assert any(f'"{name}"' in problem and words in problem for problem in problems), (name, problems)


def test_a_file_that_is_not_an_object_is_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    for text in ("[1, 2]", '{"mcpServers": []}'):
        path.write_text(text, encoding="utf-8")
        servers, problems = read_mcp_config(path)
        assert servers == [] and len(problems) == 1


def test_an_entry_kestrel_cannot_read_is_kept_unless_dropped(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    sse = {"type": "sse", "url": "http://localhost:9000/sse"}
    path.write_text(json.dumps({"mcpServers": {"sse": sse, "time": {"command": "uvx"}}}), encoding="utf-8")
    assert config_names(path) == ["sse", "time"]
    write_mcp_config(path, [])
    assert json.loads(path.read_text(encoding="utf-8"))["mcpServers"] == {"sse": sse}
    write_mcp_config(path, [], drop=["sse"])
    assert json.loads(path.read_text(encoding="utf-8"))["mcpServers"] == {}


def test_nesting_is_counted_outside_strings_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    brackets = '"[[[{{{ not nesting \\" ]]"'
    deep = "[" * (DEPTH_LIMIT - 2) + "]" * (DEPTH_LIMIT - 2)
    path.write_text('{"mcpServers": {}, "kept": ' + f'[{brackets}, {deep}]' + "}", encoding="utf-8")
    assert read_mcp_file(path).damage is None
    path.write_text('{"mcpServers": {}, "kept": ' + "[" * DEPTH_LIMIT + "]" * DEPTH_LIMIT + "}", encoding="utf-8")
    damage = read_mcp_file(path).damage
    assert damage is not None and f"nested {DEPTH_LIMIT + 1} levels deep" in damage


def test_a_link_to_a_missing_file_in_a_real_folder_is_written_through(tmp_path: Path) -> None:
    link, target = tmp_path / "mcp.json", tmp_path / "shared" / "servers.json"
    target.parent.mkdir()
    link.symlink_to(target)
    assert read_mcp_file(link) == McpFile()
    write_mcp_config(link, [McpServerConfig("time", command="uvx", args=("mcp-server-time",))])
    assert link.is_symlink() and read_mcp_config(target)[0][0].name == "time"
