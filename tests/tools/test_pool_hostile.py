"""Servers that fail in every way a real one does: each ends FAILED in plain words, the others go on."""

from __future__ import annotations

import sys
from pathlib import Path

from app.tools.mcp_config import McpServerConfig
from app.tools.pool import McpPool, ServerState, ToolInfo
from tests.tools.conftest import python_server, run, time_server

START_TIMEOUT = 3.0


def test_servers_that_cannot_start_fail_with_their_words_and_the_rest_still_work() -> None:
    servers = [python_server("quitter", "exits_at_once.py"), python_server("sleeper", "hangs.py"),
               python_server("babbler", "garbage.py"), McpServerConfig("ghost", command="kestrel-no-such-server"),
               time_server()]

    async def scenario() -> None:
        pool = McpPool(lambda: servers, start_timeout=START_TIMEOUT)
        try:
            tools = await pool.tools([server.name for server in servers])
            assert {tool.server for tool in tools} == {"time"}
            status = {entry.name: entry for entry in pool.status()}
            assert all(status[name].state is ServerState.FAILED for name in ("quitter", "sleeper", "babbler", "ghost"))
            assert "fatal: WEATHER_API_KEY is not set" in status["quitter"].stderr_tail
            assert "stopped before it finished starting" in status["quitter"].error
            assert "did not finish starting within 3 s" in status["sleeper"].error
            assert "hanging server started" in status["sleeper"].stderr_tail
            assert "not MCP messages, such as: 'Welcome to the garbage server v1.0!'" in status["babbler"].error
            assert 'could not find the command "kestrel-no-such-server"' in status["ghost"].error
            assert all(f'"{name}"' in status[name].error for name in ("quitter", "sleeper", "babbler", "ghost"))
            result = await pool.call(tools[0], {"timezone": "UTC"})
            assert not result.is_error
        finally:
            await pool.close()
    run(scenario())


def test_a_failed_server_is_not_retried_on_every_answer(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    code = f"open({str(starts)!r}, 'a').write('started\\n'); raise SystemExit(1)"
    quitter = McpServerConfig("quitter", command=sys.executable, args=("-c", code))

    async def scenario(retry_after: float) -> int:
        starts.write_text("", encoding="utf-8")
        pool = McpPool(lambda: [quitter], retry_after=retry_after)
        try:
            for _ in range(3):
                assert await pool.tools(["quitter"]) == []
                assert pool.status()[0].state is ServerState.FAILED
        finally:
            await pool.close()
        return len(starts.read_text(encoding="utf-8").splitlines())

    assert run(scenario(retry_after=3600)) == 1
    assert run(scenario(retry_after=0)) == 3


def _by_name(tools: list[ToolInfo]) -> dict[str, ToolInfo]:
    return {tool.name: tool for tool in tools}


def test_tool_trouble_comes_back_as_error_results_never_as_exceptions() -> None:
    async def scenario() -> None:
        # 10 MB takes the SDK's stdio reader a few seconds on a busy machine.
        pool = McpPool(lambda: [python_server("hostile", "tools_server.py")], call_timeout=30,
                       result_limit=lambda: 1000)
        try:
            tools = _by_name(await pool.tools(["hostile"]))
            boom = await pool.call(tools["boom"], {})
            assert boom.is_error and "boom" in boom.text and "secret" not in boom.text
            refused = await pool.call(tools["refuse"], {})
            assert refused.is_error and "the disk is on fire" in refused.text
            big = await pool.call(tools["big"], {})
            assert big.cut and not big.is_error
            assert big.text.startswith("x" * 1000) and "10,000,000 characters" in big.text
            assert len(big.text) < 1200
            picture = await pool.call(tools["picture"], {})
            assert picture.text == "a tiny picture\n[image/png, 12.0 KB]"
            unknown = await pool.call(ToolInfo("hostile", "no_such_tool", "no_such_tool", "", {}), {})
            assert unknown.is_error
            echo = await pool.call(tools["echo"], {"text": "still here"})
            assert (echo.text, echo.is_error) == ("still here", False)
        finally:
            await pool.close()
    run(scenario())


def test_a_call_past_its_time_limit_is_an_error_and_the_server_goes_on() -> None:
    async def scenario() -> None:
        pool = McpPool(lambda: [python_server("hostile", "tools_server.py")], call_timeout=1)
        try:
            tools = _by_name(await pool.tools(["hostile"]))
            slow = await pool.call(tools["slow"], {"seconds": 30})
            assert slow.is_error and "stopped waiting" in slow.text and '"slow"' in slow.text
            assert "after 1 s" in slow.text
            echo = await pool.call(tools["echo"], {"text": "next"})
            assert (echo.text, echo.is_error) == ("next", False)
        finally:
            await pool.close()
    run(scenario())


def test_a_server_that_dies_mid_call_is_restarted_with_the_same_tools_and_names() -> None:
    servers = [python_server("hostile", "tools_server.py"), time_server("other")]

    async def scenario() -> None:
        pool = McpPool(lambda: servers)
        try:
            before = await pool.tools(["hostile", "other"])
            crash = await pool.call(_by_name(before)["crash"], {})
            assert crash.is_error
            status = pool.status()[0]
            assert status.state is ServerState.FAILED and "crashing now" in status.stderr_tail
            after = await pool.tools(["hostile", "other"])
            assert after == before
            echo = await pool.call(_by_name(after)["echo"], {"text": "back"})
            assert echo.text == "back"
        finally:
            await pool.close()
    run(scenario())
