"""`kestrel tools` as a user runs it: every mistake in plain words with its exit status, never a traceback;
`list --check` starts the servers and ends them. Most runs call the CLI's main() in this process (a
subprocess costs a second of imports each); `list --check` runs as a real process."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

from app.__main__ import main
from app.core.paths import data_paths
from tests.cli.test_chat_cli import kestrel
from tests.tools.conftest import SERVERS


def tools(*args: str) -> subprocess.CompletedProcess:
    """`kestrel tools ARGS` in this process, its output captured as a subprocess's would be."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(["tools", *args])
        except SystemExit as exit:  # argparse's own usage errors
            status = int(exit.code or 0)
    return subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())


def tools_process(*args: str) -> subprocess.CompletedProcess:
    result = kestrel("tools", *args, timeout=60)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    return result


def mcp_json() -> dict:
    return json.loads(data_paths().mcp_file.read_text(encoding="utf-8"))


def test_adding_listing_switching_and_removing_servers() -> None:
    assert tools("list").returncode == 0
    added = tools("add", "time", "--env", "TZ=UTC", "--", sys.executable, "-m", "mcp_server_time")
    assert added.returncode == 0, added.stderr
    assert tools("add", "web", "--url", "http://127.0.0.1:9/mcp", "--header", "Authorization=Bearer k").returncode == 0
    assert mcp_json()["mcpServers"] == {
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"], "env": {"TZ": "UTC"}},
        "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer k"}}}
    listed = tools("list")
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == [f"time  on   {sys.executable} -m mcp_server_time",
                                          "web   on   http://127.0.0.1:9/mcp"]
    assert tools("disable", "web").returncode == 0
    assert tools("disable", "time/convert_time").returncode == 0
    rows = [json.loads(line) for line in tools("list", "--json").stdout.splitlines()]
    assert [(row["name"], row["enabled"]) for row in rows] == [("time", True), ("web", False)]
    assert rows[1]["headers"] == ["Authorization"] and "Bearer k" not in json.dumps(rows)
    assert tools("enable", "web").returncode == 0 and tools("enable", "time/convert_time").returncode == 0
    assert "disabled" not in mcp_json()["mcpServers"]["web"]
    removed = tools("remove", "web")
    assert removed.returncode == 0 and list(mcp_json()["mcpServers"]) == ["time"]


def test_check_starts_each_server_and_shows_its_tools_or_its_error() -> None:
    tools("add", "time", "--", sys.executable, "-m", "mcp_server_time", "--local-timezone=UTC")
    tools("add", "quitter", "--", sys.executable, str(SERVERS / "exits_at_once.py"))
    tools("disable", "time/convert_time")
    checked = tools_process("list", "--check", "--timeout", "20")
    assert checked.returncode == 8, checked.stderr
    lines = checked.stdout.splitlines()
    assert lines[1] == "  ready, 2 tools: get_current_time, convert_time (off)"
    assert lines[3].startswith('  failed: The MCP server "quitter" stopped before it finished starting')
    assert "    stderr: fatal: WEATHER_API_KEY is not set" in lines
    rows = [json.loads(line) for line in tools("list", "--check", "--json").stdout.splitlines()]
    assert rows[0]["state"] == "ready" and rows[1]["state"] == "failed"
    assert [tool["enabled"] for tool in rows[0]["tools"]] == [True, False]


def test_a_server_writing_garbage_is_reported_in_words_not_tracebacks() -> None:
    tools("add", "babbler", "--", sys.executable, str(SERVERS / "garbage.py"))
    checked = tools_process("list", "--check", "--timeout", "2")  # no Traceback: checked in tools_process
    assert checked.returncode == 8
    assert "'Welcome to the garbage server v1.0!'" in checked.stdout
    assert checked.stderr == ""


def test_every_mistake_gets_plain_words_and_its_status() -> None:
    tools("add", "time", "--", "uvx", "mcp-server-time")
    cases = [
        (("add", "time", "--", "other"), 2, 'already a server named "time"'),
        (("add", "new"), 2, "Say how to start the server"),
        (("add", "new", "--url", "ftp://x"), 2, "not an http:// or https:// address"),
        (("add", "new", "--url", "http://x", "--header", "novalue"), 2, "is not NAME=VALUE"),
        (("add", "new", "--url", "http://x", "--", "cmd"), 2, "not both"),
        (("add", "new", "--bogus", "--", "cmd"), 2, "unrecognized arguments: --bogus"),
        (("add", "new", "--header", "A=b", "--", "cmd"), 2, "--header is for --url servers"),
        (("add", "a/b", "--", "cmd"), 2, "cannot be a server name"),
        (("remove", "nope"), 2, 'no server named "nope". The servers are: time.'),
        (("disable", "nope/tool"), 2, 'no server named "nope"'),
        (("disable", "time/"), 2, "Name the tool after the slash"),
        (("list", "--check", "--timeout", "0"), 2, "--timeout 0 is not allowed"),
    ]
    for args, status, words in cases:
        result = tools(*args)
        assert (result.returncode, words in result.stderr) == (status, True), (args, result.stderr)


def test_a_damaged_mcp_json_is_reported_and_never_overwritten() -> None:
    path = data_paths().mcp_file
    path.parent.mkdir(parents=True)
    path.write_text('{"mcpServers": {"time": ', encoding="utf-8")
    listed = tools("list")
    assert listed.returncode == 3 and "is not valid JSON" in listed.stderr  # as the README says
    added = tools("add", "time", "--", "uvx", "mcp-server-time")
    assert added.returncode == 3 and "changes nothing in it until it is fixed" in added.stderr
    assert path.read_text(encoding="utf-8") == '{"mcpServers": {"time": '


def test_without_servers_list_says_how_to_add_one(tmp_path: Path) -> None:
    listed = tools("list")
    assert listed.returncode == 0 and listed.stdout == ""
    assert "kestrel tools add NAME -- COMMAND" in listed.stderr
