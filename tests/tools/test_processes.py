"""How stdio servers are started: the Linux launcher's death signal (app/core/children/launcher.py), the stderr
tail, and the Windows job object the SDK puts each server in (checked on its call sequence only: there is no
Windows here)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.client import stdio
from mcp.os.win32 import utilities as win32_utilities

from app.core.children import commands, launcher
from app.core.children.commands import CommandChild, launch_command
from app.tools import processes
from app.tools.processes import StderrTail, find_command
from tests.tools.conftest import run

READ_DEATH_SIGNAL = ("import ctypes; value = ctypes.c_int(); "
                     "ctypes.CDLL(None).prctl(2, ctypes.byref(value)); print(value.value)")  # PR_GET_PDEATHSIG


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_launchers_server_dies_with_its_supervisor_which_passes_on_its_exit_status() -> None:
    command, args = launch_command(sys.executable, ["-c", READ_DEATH_SIGNAL])
    assert args[:3] == ["-I", "-S", launcher.__file__]
    done = subprocess.run([command, *args], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout.strip()) == (0, "9")  # SIGKILL
    plain = subprocess.run([sys.executable, "-c", READ_DEATH_SIGNAL], capture_output=True, text=True, timeout=30)
    assert plain.stdout.strip() == "0"
    command, args = launch_command(sys.executable, ["-c", "import os, sys; print(os.getppid()); sys.exit(5)"])
    supervised = subprocess.run([command, *args], capture_output=True, text=True, timeout=30)
    assert supervised.returncode == 5 and int(supervised.stdout) != os.getpid()  # the supervisor is its parent
    command, args = launch_command(sys.executable, ["-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert subprocess.run([command, *args], timeout=30).returncode == 128 + 9


def test_the_launcher_runs_nothing_for_a_parent_that_is_gone_and_names_a_missing_command() -> None:
    script = [sys.executable, "-I", "-S", launcher.__file__]
    orphan = subprocess.run([*script, "1", sys.executable, "-c", "print('ran')"], capture_output=True,
                            text=True, timeout=30)
    assert orphan.returncode == 1 and orphan.stdout == ""
    missing = subprocess.run([*script, str(os.getpid()), "kestrel-no-such-server"], capture_output=True,
                             text=True, timeout=30)
    assert missing.returncode == launcher.EXIT_NOT_RUN
    assert "kestrel-no-such-server: No such file or directory" in missing.stderr


def test_elsewhere_and_frozen_the_server_is_started_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands.sys, "platform", "darwin")
    assert launch_command("npx", ["-y", "server"]) == ("npx", ["-y", "server"])
    assert CommandChild(processes.TOKEN_VARIABLE).command_line("npx", ["-y", "server"]) == ("npx", ["-y", "server"])
    monkeypatch.setattr(commands.sys, "platform", "linux")
    monkeypatch.setattr(commands.sys, "frozen", True, raising=False)
    assert launch_command("npx", ["-y", "server"]) == ("npx", ["-y", "server"])


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script is no program on Windows")
def test_a_command_is_looked_for_on_the_path_the_server_gets(tmp_path: Path) -> None:
    program = tmp_path / "my-server"
    program.write_text("#!/bin/sh\n", encoding="utf-8")
    program.chmod(0o755)
    assert find_command("my-server", {"PATH": str(tmp_path)}) == str(program)
    assert find_command("my-server", {"PATH": os.defpath}) is None
    assert find_command(str(program), {}) == str(program)
    assert find_command(str(tmp_path / "nothing"), {}) is None


def test_the_stderr_tail_keeps_the_last_lines_each_cut_short() -> None:
    async def scenario() -> tuple[str, ...]:
        tail = StderrTail(lines=5)
        script = "import sys\nfor n in range(100): print(f'line {n}', file=sys.stderr)\nprint('y' * 5000, file=sys.stderr)"
        process = subprocess.Popen([sys.executable, "-c", script], stderr=tail.writer)
        tail.close_writer()
        process.wait(timeout=30)
        await tail.settled(5)
        return tail.lines()

    lines = run(scenario())
    assert lines[:2] == ("line 98", "line 99")
    assert all(len(line) <= 500 for line in lines) and lines[-1].startswith("yyy")


class _FakeProcess:
    pid = 4242


class _Recorder:
    """Stands in for pywin32's modules, writing down each call."""

    JobObjectExtendedLimitInformation = 9
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
    PROCESS_SET_QUOTA, PROCESS_TERMINATE = 0x100, 0x1
    error = OSError

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        def record(*args: Any) -> Any:
            self.calls.append((name, args))
            if name == "QueryInformationJobObject":
                return {"BasicLimitInformation": {"LimitFlags": 0}}
            return f"handle from {name}"
        return record


def test_on_windows_each_server_goes_into_a_job_that_kills_it_when_kestrel_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Kestrel relies on the SDK for on Windows: a job object with KILL_ON_JOB_CLOSE per server (so a
    killed Kestrel's closed handle ends the servers), the server assigned to it right after it starts."""
    assert "create_windows_process" in inspect.getsource(stdio._create_platform_compatible_process)
    recorder = _Recorder()
    for name in ("win32api", "win32con", "win32job", "pywintypes"):
        monkeypatch.setattr(win32_utilities, name, recorder)
    monkeypatch.setattr(win32_utilities, "sys", SimpleNamespace(platform="win32"))
    job = win32_utilities._create_job_object()
    process = _FakeProcess()
    win32_utilities._maybe_assign_process_to_job(process, job)  # type: ignore[arg-type]
    assert win32_utilities._process_jobs.pop(process) == job  # kept until the server is closed
    names = [name for name, _ in recorder.calls]
    assert names == ["CreateJobObject", "QueryInformationJobObject", "SetInformationJobObject", "OpenProcess",
                     "AssignProcessToJobObject", "CloseHandle"]
    limits = recorder.calls[2][1][2]["BasicLimitInformation"]["LimitFlags"]
    assert limits & _Recorder.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    assert recorder.calls[3][1][2] == 4242
    assert recorder.calls[4][1] == (job, "handle from OpenProcess")


@pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX's")
def test_only_a_group_that_still_holds_the_servers_token_is_killed() -> None:
    variable, token = processes.TOKEN_VARIABLE, "a server's token"
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True,
                            env={**os.environ, variable: token})
    try:
        # Under load the new child's environment was once not readable yet (None in a CI run at load 5):
        # what is checked is which child is found, not how soon.
        deadline = time.monotonic() + 10
        while commands.find_child_pid(variable, token) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert commands.find_child_pid(variable, token) == ours.pid
        commands.end_process_group(stranger.pid, variable, token)  # a reused pid: not the server's group
        commands.end_process_group(ours.pid, variable, token)
        assert ours.wait(timeout=10) == -9
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait(timeout=10)
