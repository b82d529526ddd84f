"""The pool's life cycle: only named, enabled servers start; an edited entry restarts its server; a caller
that stops waiting stops its call, and calls to one server run side by side."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from app.tools.pool import McpPool, ServerState
from tests.tools.conftest import python_server, run, time_server


def test_only_the_named_enabled_servers_start_and_an_edited_one_restarts() -> None:
    servers = [python_server("edited", "tools_server.py"), replace(time_server("off"), enabled=False),
               time_server("unasked")]

    async def arguments(pool: McpPool) -> str:
        tools = {tool.name: tool for tool in await pool.tools(["edited", "off"])}
        return (await pool.call(tools["arguments"], {})).text

    async def scenario() -> None:
        pool = McpPool(lambda: servers)
        try:
            assert await arguments(pool) == ""
            assert [status.state for status in pool.status()] == [ServerState.READY, ServerState.STOPPED,
                                                                  ServerState.STOPPED]
            servers[0] = replace(servers[0], args=(*servers[0].args, "--edited"))
            assert await arguments(pool) == "--edited"
            servers[0] = replace(servers[0], enabled=False)
            assert await pool.tools(["edited"]) == []
            assert pool.status()[0].state is ServerState.STOPPED
        finally:
            await pool.close()
    run(scenario())


def test_a_caller_that_stops_waiting_stops_its_call_and_calls_run_side_by_side() -> None:
    async def scenario() -> None:
        pool = McpPool(lambda: [python_server("hostile", "tools_server.py")])
        try:
            tools = {tool.name: tool for tool in await pool.tools(["hostile"])}
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(pool.call(tools["slow"], {"seconds": 30}), 0.5)
            started = time.monotonic()
            both = await asyncio.gather(pool.call(tools["slow"], {"seconds": 1}),
                                        pool.call(tools["echo"], {"text": "meanwhile"}))
            assert [result.text for result in both] == ["done", "meanwhile"]
            assert time.monotonic() - started < 25  # a behaviour, not a timing goal: not queued behind the 30 s call
            assert pool.status()[0].state is ServerState.READY
        finally:
            await pool.close()
    run(scenario())


def test_closing_the_pool_answers_a_call_in_flight() -> None:
    async def scenario() -> None:
        pool = McpPool(lambda: [python_server("hostile", "tools_server.py")])
        try:
            tools = {tool.name: tool for tool in await pool.tools(["hostile"])}
            call = asyncio.ensure_future(pool.call(tools["slow"], {"seconds": 30}))
            await asyncio.sleep(0.5)
        finally:
            await pool.close()
        result = await asyncio.wait_for(call, 5)
        assert result.is_error and 'stopped before "slow" finished' in result.text
    run(scenario())
