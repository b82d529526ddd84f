"""No server outlives Kestrel: close() ends each server and its children, and a SIGKILLed Kestrel takes
its servers with it; on Linux also what a server starts in a session of its own (app/core/children/launcher.py's
supervisor, and a cgroup where the system allows one: both ways are tried here)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from app.core.children import cgroup
from app.core.children.cgroup import make_cgroup, own_cgroup
from app.tools.pool import McpPool
from tests.tools.conftest import python_server, run

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's supervisor and cgroups")
# Each way Kestrel contains a server on Linux: a cgroup (where the system lets Kestrel make one) and the
# supervisor alone (everywhere else); a test that needs a cgroup is skipped where none can be made.
WAYS = ["cgroup", "supervisor"]


@pytest.fixture
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "supervisor":
        monkeypatch.setattr(cgroup, "make_cgroup", lambda token: None)
    else:
        probe = make_cgroup("probe")
        if probe is None:
            pytest.skip(f"Kestrel cannot make cgroups here ({own_cgroup() or 'no cgroup v2'} is not writable)")
        probe.rmdir()
    return str(request.param)

GONE_WITHIN_S = 10


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # dead, waiting for whoever reaps it
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids: list[int]) -> list[int]:
    """The pids still alive after the wait."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline and not all(_gone(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if not _gone(pid)]


def _server_pids() -> list[int]:
    return [child.pid for child in psutil.Process().children() if "tools_server.py" in " ".join(child.cmdline())]


def test_close_ends_each_server_and_the_children_it_started() -> None:
    async def scenario() -> tuple[list[int], int]:
        pool = McpPool(lambda: [python_server("parent", "tools_server.py", "--child")])
        try:
            tools = {tool.name: tool for tool in await pool.tools(["parent"])}
            grandchild = int((await pool.call(tools["child_pid"], {})).text)
            servers = _server_pids()
            assert len(servers) == 1
            assert grandchild in [child.pid for child in psutil.Process(servers[0]).children(recursive=True)]
        finally:
            await pool.close()
        return servers, grandchild

    servers, grandchild = run(scenario())
    assert _wait_gone([*servers, grandchild]) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_servers_die_with_a_kestrel_that_is_killed(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, str(Path(__file__).with_name("pool_parent.py"))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        servers = json.loads(line)
        assert len(servers) == 3, line
        assert all(not _gone(pid) for pid in servers)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        if parent.stdout is not None:
            parent.stdout.close()
    assert _wait_gone(servers) == []


def _pid_in(path: Path) -> int:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, "the server never started its sleeper"
        time.sleep(0.05)
    return int(path.read_text(encoding="utf-8"))


@LINUX
@pytest.mark.parametrize("way", WAYS, indirect=True)
@pytest.mark.parametrize("how", [(), ("--daemon",)], ids=["setsid", "daemon"])
def test_close_ends_what_a_server_started_in_a_session_of_its_own(tmp_path: Path, way: str, how: tuple[str]) -> None:
    pid_file = tmp_path / "sleeper.pid"

    async def scenario() -> int:
        pool = McpPool(lambda: [python_server("clock", "escaping_clock.py", str(pid_file), *how)])
        try:
            await pool.tools(["clock"])
            sleeper = await asyncio.to_thread(_pid_in, pid_file)
            assert not _gone(sleeper)
        finally:
            await pool.close()
        return sleeper

    sleeper = run(scenario())
    try:
        assert _wait_gone([sleeper]) == []
    finally:
        _kill(sleeper)


@LINUX
@pytest.mark.parametrize("way", WAYS, indirect=True)
def test_a_killed_kestrel_takes_what_its_servers_started_in_sessions_of_their_own(tmp_path: Path, way: str) -> None:
    pid_file = tmp_path / "sleeper.pid"
    sleeper = 0
    parent = subprocess.Popen([sys.executable, str(Path(__file__).with_name("escaping_parent.py")), str(pid_file),
                               *(["--no-cgroup"] if way == "supervisor" else [])], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        supervisors = json.loads(parent.stdout.readline())
        sleeper = _pid_in(pid_file)
        assert len(supervisors) == 1 and not _gone(sleeper)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        if parent.stdout is not None:
            parent.stdout.close()
    try:
        assert _wait_gone([*supervisors, sleeper]) == []
    finally:
        _kill(sleeper)


@pytest.fixture
def private_cgroup(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cgroup of this test's own below the worker's, seen by this test as the one it runs in.

    Every start of Kestrel removes the cgroups that a killed Kestrel left (make_cgroup): the other xdist
    worker, starting an MCP server of its own in the shared cgroup, would end the sleeper this test
    means to leave behind before the test's own "next start" (seen once in CI). Below a folder whose
    name is not Kestrel's, only this test's starts see what the test leaves."""
    parent = own_cgroup()
    assert parent is not None
    folder = parent / f"kestrel-test-{os.getpid()}-{time.monotonic_ns()}"
    folder.mkdir()
    monkeypatch.setattr(cgroup, "own_cgroup", lambda: folder)
    try:
        yield folder
    finally:
        for child in [*folder.iterdir()]:
            if child.is_dir():
                cgroup.end_cgroup(child)
        cgroup.end_cgroup(folder)


@LINUX
@pytest.mark.parametrize("way", ["cgroup"], indirect=True)
def test_a_cgroup_left_by_a_killed_kestrel_and_supervisor_is_ended_on_the_next_start(
        tmp_path: Path, way: str, private_cgroup: Path) -> None:
    pid_file = tmp_path / "sleeper.pid"
    procs = private_cgroup / "cgroup.procs"
    parent = subprocess.Popen([sys.executable, str(Path(__file__).with_name("escaping_parent.py")), str(pid_file)],
                              stdout=subprocess.PIPE, text=True,
                              preexec_fn=lambda: procs.write_text(str(os.getpid()), encoding="ascii"))
    try:
        assert parent.stdout is not None
        supervisors = json.loads(parent.stdout.readline())
        sleeper = _pid_in(pid_file)
        _kill(supervisors[0])  # the supervisor first, so that nothing but the cgroup holds the sleeper
        _kill(parent.pid)
    finally:
        parent.kill()
        parent.wait(timeout=10)
        if parent.stdout is not None:
            parent.stdout.close()
    try:
        time.sleep(0.5)
        assert not _gone(sleeper)  # an orphan of init now, in the abandoned cgroup
        left = [child.name for child in private_cgroup.iterdir() if child.is_dir()]
        assert len(left) == 1 and left[0].startswith(f"kestrel-mcp-{parent.pid}-"), left
        folder = make_cgroup("next start")
        assert folder is not None and folder.parent == private_cgroup
        folder.rmdir()
        assert _wait_gone([sleeper]) == []
        assert [child for child in private_cgroup.iterdir() if child.is_dir()] == []
    finally:
        _kill(sleeper)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
