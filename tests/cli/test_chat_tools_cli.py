"""`kestrel chat --tools`: a real model's call, a real MCP server, approval by flag or refusal without a terminal."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.core.paths import data_paths
from app.core.settings import Settings, SettingsFile
from app.tools.mcp_config import McpServerConfig, write_mcp_config
from tests.cli.test_chat_cli import assert_no_traceback, json_lines, kestrel
from tests.helpers.tool_call_gguf import build_tool_call_gguf

CLOCK = Path(__file__).resolve().parents[1] / "tools" / "servers" / "clock_server.py"


@pytest.fixture
def caller(tmp_path: Path) -> Path:
    """llama.cpp on a tiny GGUF whose weights call get_time({"zone": "UTC"}), and the clock server."""
    paths = data_paths().ensure()
    write_mcp_config(paths.mcp_file, [McpServerConfig("clock", command=sys.executable, args=(str(CLOCK),))])
    SettingsFile(paths.settings_file).save(Settings(tool_rounds=1))  # it calls again each round
    return build_tool_call_gguf(tmp_path / "caller.gguf")


def test_an_allowed_call_runs_and_its_result_goes_back_to_the_model(caller: Path) -> None:
    result = kestrel("chat", "--model", str(caller), "--tools", "clock", "--allow-tools", "get_time", "--json",
                     "--temperature", "0", "What time is it?")
    assert_no_traceback(result)
    assert result.returncode == 0, result.stderr
    lines = json_lines(result.stdout)
    kinds = [line["type"] for line in lines]
    assert kinds[0] == "delta" and "tool_call" in kinds and kinds[-1] == "done"
    call = next(line for line in lines if line["type"] == "tool_call")
    assert (call["server"], call["name"], call["arguments"]) == ("clock", "get_time", {"zone": "UTC"})
    answer = next(line for line in lines if line["type"] == "tool_result")
    assert answer == {"type": "tool_result", "id": call["id"], "text": "12:00 in UTC", "is_error": False,
                      "denied": False}
    assert kinds.index("tool_result") > kinds.index("tool_call")


def test_without_a_terminal_or_the_flag_a_call_is_refused_saying_how_to_allow_it(caller: Path) -> None:
    result = kestrel("chat", "--model", str(caller), "--tools", "clock", "--temperature", "0", "Time?")
    assert_no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert "--allow-tools get_time" in result.stderr and "was not run" in result.stderr
    assert "← denied:" in result.stderr and "Checking." in result.stdout


def test_an_unknown_server_is_named_with_the_ones_there(caller: Path) -> None:
    result = kestrel("chat", "--model", str(caller), "--tools", "clock,weather", "Hi")
    assert result.returncode == 2 and "weather is not an enabled server" in result.stderr
    assert "clock" in result.stderr and "kestrel tools add" in result.stderr
