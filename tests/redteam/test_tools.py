"""Issue 35, the MCP door: a tool result too large for the context, a hostile mcp.json, servers whose
children try to outlive Kestrel. Each case as the issue gives it, run through the real CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from app.core.paths import data_paths
from app.core.settings import Settings, SettingsFile
from app.tools.mcp_config import McpServerConfig, write_mcp_config
from tests.cli.test_chat_cli import ROOT, assert_no_traceback, json_lines, kestrel
from tests.helpers.tool_call_gguf import build_tool_call_gguf
from tests.tools.conftest import SERVERS

GONE_WITHIN_S = 15
# Every `kestrel tools` command, each of which must refuse a damaged mcp.json the same way.
TOOLS_COMMANDS = (("list",), ("list", "--json"), ("add", "clock", "--", "uvx", "mcp-server-time"),
                  ("remove", "time"), ("enable", "time"), ("disable", "time/get_time"))


@pytest.fixture(scope="module")
def caller(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """llama.cpp on a tiny GGUF (a 2,048-token context) whose weights call get_time({"zone": "UTC"})."""
    return build_tool_call_gguf(tmp_path_factory.mktemp("caller") / "caller.gguf")


def _servers(*servers: McpServerConfig) -> Path:
    paths = data_paths().ensure()
    write_mcp_config(paths.mcp_file, list(servers))
    SettingsFile(paths.settings_file).save(Settings(tool_rounds=1))  # it calls again each round
    return paths.mcp_file


def _tools_process(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    result = kestrel("tools", *args, timeout=timeout)
    assert_no_traceback(result)
    return result


# --- item 12: a tool result is cut to the room left in the context --------------------------------------------

def test_a_200000_character_result_is_cut_to_the_context_and_the_answer_goes_on(caller: Path) -> None:
    _servers(McpServerConfig("clock", command=sys.executable, args=(str(SERVERS / "huge_clock.py"),)))
    result = kestrel("chat", "--model", str(caller), "--ctx", "2048", "--tools", "clock", "--allow-tools", "get_time",
                     "--json", "--temperature", "0", "What time is it?")
    assert_no_traceback(result)
    assert "Shorten the message" not in result.stderr
    assert result.returncode == 0, result.stderr
    lines = json_lines(result.stdout)
    assert lines[-1]["type"] == "done"
    seen = next(line for line in lines if line["type"] == "tool_result")["text"]
    assert seen.startswith("12:00 in UTC xxx") and not seen.endswith("x")
    assert "of 200,000 characters to fit the model's context" in seen
    assert len(seen) < 2048 * 4  # no more than a 2,048-token context can hold, whatever the tokenizer


def test_the_terminal_says_a_result_was_cut(caller: Path) -> None:
    _servers(McpServerConfig("clock", command=sys.executable, args=(str(SERVERS / "huge_clock.py"),)))
    result = kestrel("chat", "--model", str(caller), "--ctx", "2048", "--tools", "clock", "--allow-tools", "get_time",
                     "--temperature", "0", "What time is it?")
    assert_no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert "← result, cut to " in result.stderr and "of 200,000 characters to fit the model's context: 12:00 in UTC" \
        in result.stderr, result.stderr


# --- item 13: mcp.json as a hostile file -------------------------------------------------------------------------

def _write_mcp(content: str) -> Path:
    path = data_paths().ensure().mcp_file
    path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize("content", ["[" * 100_000 + "]" * 100_000,
                                     '{"mcpServers": {"a": {"command": "x", "env": ' + "[" * 100_000 + "]" * 100_000
                                     + "}}}",
                                     '{"mcpServers": {"time": '])
def test_a_nested_or_invalid_mcp_json_is_exit_3_with_words_for_every_tools_command(content: str) -> None:
    path = _write_mcp(content)
    for args in TOOLS_COMMANDS:
        result = _tools_process(*args)
        assert result.returncode == 3, (args, result.stderr)
        assert "mcp.json" in result.stderr and ("not valid JSON" in result.stderr or "nested" in result.stderr), \
            (args, result.stderr)
    assert path.read_text(encoding="utf-8") == content  # never overwritten


def test_a_nested_mcp_json_stops_chat_tools_with_words(tiny_model: Path) -> None:
    _write_mcp("[" * 100_000 + "]" * 100_000)
    result = kestrel("chat", "--model", str(tiny_model), "--tools", "time", "Hi", timeout=60)
    assert_no_traceback(result)
    assert result.returncode == 2 and "mcp.json" in result.stderr and "nested" in result.stderr, result.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX's")
def test_a_fifo_mcp_json_is_refused_in_words_not_waited_on() -> None:
    path = data_paths().ensure().mcp_file
    os.mkfifo(path)
    for args in TOOLS_COMMANDS:
        result = _tools_process(*args, timeout=30)  # a hang fails here, as TimeoutExpired
        assert result.returncode == 3 and "named pipe" in result.stderr, (args, result.stderr)
    assert path.is_fifo()


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_a_link_to_dev_zero_is_refused_without_reading_it() -> None:
    path = data_paths().ensure().mcp_file
    path.symlink_to("/dev/zero")
    started = time.monotonic()
    for args in TOOLS_COMMANDS:
        result = _tools_process(*args, timeout=30)
        assert result.returncode == 3 and "device" in result.stderr, (args, result.stderr)
    assert time.monotonic() - started < 120
    assert path.is_symlink() and os.readlink(path) == "/dev/zero"


def test_an_mcp_json_over_a_megabyte_is_refused_in_words() -> None:
    _write_mcp('{"mcpServers": {}, "notes": "' + "n" * 2_000_000 + '"}')
    result = _tools_process("list")
    assert result.returncode == 3 and "larger than" in result.stderr, result.stderr


def test_a_linked_mcp_json_is_written_through_to_its_target_and_stays_a_link(tmp_path: Path) -> None:
    shared = tmp_path / "Claude" / "claude_desktop_config.json"
    shared.parent.mkdir()
    shared.write_text(json.dumps({"globalShortcut": "Ctrl+Space",
                                  "mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}),
                      encoding="utf-8")
    link = data_paths().ensure().mcp_file
    link.symlink_to(shared)
    added = _tools_process("add", "clock", "--", sys.executable, str(SERVERS / "clock_server.py"))
    assert added.returncode == 0, added.stderr
    assert link.is_symlink() and os.readlink(link) == str(shared)
    data = json.loads(shared.read_text(encoding="utf-8"))
    assert list(data["mcpServers"]) == ["time", "clock"] and data["globalShortcut"] == "Ctrl+Space"
    assert _tools_process("disable", "time").returncode == 0
    assert link.is_symlink() and json.loads(shared.read_text(encoding="utf-8"))["mcpServers"]["time"]["disabled"]
    assert [p.name for p in shared.parent.iterdir()] == [shared.name]  # no temporary left behind


def test_a_link_that_loops_is_refused_in_words(tmp_path: Path) -> None:
    link = data_paths().ensure().mcp_file
    other = tmp_path / "other.json"
    other.symlink_to(link)
    link.symlink_to(other)
    result = _tools_process("add", "clock", "--", "uvx", "mcp-server-time")
    assert result.returncode in (3, 7) and "mcp.json" in result.stderr, result.stderr
    assert link.is_symlink() and other.is_symlink()


# --- item 14: nothing a server starts outlives Kestrel -------------------------------------------------------

def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline and not _gone(pid):
        time.sleep(0.05)
    return _gone(pid)


def _wait_for_pid(path: Path, process: subprocess.Popen | None = None) -> int:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, "the server never started its sleeper"
        assert process is None or process.poll() is None, "kestrel ended before the server started its sleeper"
        time.sleep(0.05)
    return int(path.read_text(encoding="utf-8"))


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's containment (a supervisor, cgroups)")
@pytest.mark.parametrize("how", ["setsid", "daemon"])
def test_a_child_in_its_own_session_ends_with_a_normal_chat_end(caller: Path, tmp_path: Path, how: str) -> None:
    pid_file = tmp_path / "sleeper.pid"
    extra = ("--daemon",) if how == "daemon" else ()
    _servers(McpServerConfig("clock", command=sys.executable,
                             args=(str(SERVERS / "escaping_clock.py"), str(pid_file), *extra)))
    result = kestrel("chat", "--model", str(caller), "--tools", "clock", "--allow-tools", "get_time", "--json",
                     "--temperature", "0", "What time is it?")
    assert_no_traceback(result)
    assert result.returncode == 0, result.stderr
    sleeper = _wait_for_pid(pid_file)
    try:
        assert _wait_gone(sleeper), f"the server's {how} child {sleeper} outlived kestrel chat"
    finally:
        _kill(sleeper)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's containment (a supervisor, cgroups)")
@pytest.mark.parametrize("how", ["setsid", "daemon"])
def test_a_child_in_its_own_session_ends_with_a_killed_kestrel(caller: Path, tmp_path: Path, how: str) -> None:
    pid_file = tmp_path / "sleeper.pid"
    extra = ("--daemon",) if how == "daemon" else ()
    _servers(McpServerConfig("clock", command=sys.executable,
                             args=(str(SERVERS / "escaping_clock.py"), str(pid_file), "--hang", *extra)))
    chat = subprocess.Popen([sys.executable, "-m", "app", "chat", "--model", str(caller), "--tools", "clock",
                             "--allow-tools", "get_time", "--json", "What time is it?"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sleeper = 0
    try:
        sleeper = _wait_for_pid(pid_file, chat)
        chat.send_signal(signal.SIGKILL)
        chat.wait(timeout=30)
        assert _wait_gone(sleeper), f"the server's {how} child {sleeper} outlived a killed kestrel"
    finally:
        _kill(chat.pid)
        chat.wait(timeout=30)
        if sleeper:
            _kill(sleeper)
