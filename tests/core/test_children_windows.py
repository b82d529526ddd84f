"""The Windows job object a Python child runs in (app/core/children/windows_job.py), on a recorded kernel32.

There is no Windows here: these tests check the calls Kestrel makes and the structure it hands Windows,
against the Windows SDK's definitions (x64 sizes and offsets), never that Windows then kills anything."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from app.core.children import windows_job
from app.core.children.in_child import ChildLimits
from app.core.children.python_child import start_python_child
from app.core.children.windows_job import (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, JOB_OBJECT_LIMIT_PROCESS_MEMORY,
                                           PROCESS_SET_QUOTA, PROCESS_TERMINATE, ExtendedLimits, contain)

ROOT = Path(__file__).resolve().parents[2]
# The signals Python's signal module has on Windows.
WINDOWS_SIGNALS = ("SIGABRT", "SIGFPE", "SIGILL", "SIGINT", "SIGSEGV", "SIGTERM", "SIGBREAK")


class RecordedKernel32:
    """Stands in for kernel32, writing down each call; `refuse` names a call that fails (returns 0)."""

    def __init__(self, refuse: str = "") -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.limits: list[ExtendedLimits] = []
        self._refuse = refuse

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append((name, args))
            if name == "SetInformationJobObject":  # a copy of what Windows would read through the pointer
                self.limits.append(ExtendedLimits.from_buffer_copy(args[2]._obj))
            if name == self._refuse:
                return 0
            return {"CreateJobObjectW": "job", "OpenProcess": "process"}.get(name, 1)
        return call

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@pytest.fixture
def kernel32(monkeypatch: pytest.MonkeyPatch) -> RecordedKernel32:
    recorded = RecordedKernel32()
    monkeypatch.setattr(windows_job, "_kernel32", lambda: recorded)
    return recorded


def test_the_structure_is_laid_out_as_windows_x64_reads_it() -> None:
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        pytest.skip("the sizes checked are 64-bit Windows'")
    assert ctypes.sizeof(windows_job.BasicLimits) == 64
    assert ctypes.sizeof(windows_job.IoCounters) == 48
    assert ctypes.sizeof(ExtendedLimits) == 144
    assert windows_job.BasicLimits.LimitFlags.offset == 16
    assert ExtendedLimits.ProcessMemoryLimit.offset == 112


def test_a_child_goes_into_a_job_that_kills_it_when_kestrels_handle_closes(kernel32: RecordedKernel32) -> None:
    job = contain(4242, 1536 * 2**20)
    assert job is not None
    assert kernel32.names() == ["CreateJobObjectW", "SetInformationJobObject", "OpenProcess",
                                "AssignProcessToJobObject", "CloseHandle"]
    assert kernel32.calls[0][1] == (None, None)  # no security attributes: the handle is not inherited
    assert kernel32.calls[1][1][:2] == ("job", windows_job.JOB_OBJECT_EXTENDED_LIMIT_INFORMATION)
    assert kernel32.calls[1][1][3] == ctypes.sizeof(ExtendedLimits)
    limits = kernel32.limits[0]
    assert limits.BasicLimitInformation.LimitFlags == JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_PROCESS_MEMORY
    assert limits.ProcessMemoryLimit == 1536 * 2**20
    assert kernel32.calls[2][1] == (PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, 4242)
    assert kernel32.calls[3][1] == ("job", "process")
    assert kernel32.calls[4][1] == ("process",)  # the process handle is let go; the job's is kept
    job.terminate()
    job.close()
    job.close()
    assert kernel32.calls[5:] == [("TerminateJobObject", ("job", windows_job.KILLED_EXIT_CODE)), ("CloseHandle", ("job",))]


def test_without_a_memory_cap_the_job_only_kills_on_close(kernel32: RecordedKernel32) -> None:
    assert contain(4242, None) is not None
    assert kernel32.limits[0].BasicLimitInformation.LimitFlags == JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    assert kernel32.limits[0].ProcessMemoryLimit == 0


@pytest.mark.parametrize("refused", ["SetInformationJobObject", "OpenProcess", "AssignProcessToJobObject"])
def test_a_job_windows_refuses_is_closed_and_the_child_runs_on(monkeypatch: pytest.MonkeyPatch, refused: str) -> None:
    kernel32 = RecordedKernel32(refuse=refused)
    monkeypatch.setattr(windows_job, "_kernel32", lambda: kernel32)
    assert contain(4242, None) is None
    assert ("CloseHandle", ("job",)) in kernel32.calls
    assert "TerminateJobObject" not in kernel32.names()
    assert (("CloseHandle", ("process",)) in kernel32.calls) == (refused == "AssignProcessToJobObject")


def test_nothing_is_asked_of_windows_elsewhere() -> None:
    if sys.platform == "win32":
        pytest.skip("this is Windows")
    assert windows_job._kernel32() is None
    assert contain(4242, 1024) is None


def answer_then_wait(conn: Connection) -> None:
    conn.send("started")
    conn.recv()


def test_a_python_child_is_put_in_its_job_and_the_job_ended_with_it(kernel32: RecordedKernel32) -> None:
    """The real start of a Python child, as it would run on Windows: its pid and memory cap go to the job;
    ending a child that is still running kills its job, then closes it."""
    child, conn = start_python_child(answer_then_wait, (), name="kestrel-test-job",
                                     limits=ChildLimits(memory_bytes=1536 * 2**20))
    try:
        assert conn.poll(60) and conn.recv() == "started"
        assert kernel32.calls[2][1] == (PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, child.pid)
        assert kernel32.limits[0].ProcessMemoryLimit == 1536 * 2**20
        assert "TerminateJobObject" not in kernel32.names()
        child.end()
        assert kernel32.calls[-2:] == [("TerminateJobObject", ("job", windows_job.KILLED_EXIT_CODE)),
                                       ("CloseHandle", ("job",))]
    finally:
        child.end()
        conn.close()


def test_the_supervisor_and_its_owners_load_with_only_the_signals_windows_has() -> None:
    """Every Python child imports the supervisor first, and the MCP servers' connection imports it too: a
    signal Windows lacks (SIGKILL, SIGHUP, SIGCHLD), named where a module loads, would stop both there.
    Here the other signals are taken out of the signal module, sys.platform says win32 (what comes from
    outside is imported before), and a child's start runs as on Windows."""
    code = textwrap.dedent(f"""
        import os, sys
        import asyncio, multiprocessing.connection, subprocess, anyio, numpy, psutil, mcp.client.stdio  # from outside
        import signal
        for name in [name for name in dir(signal) if name.startswith("SIG") and not name.startswith("SIG_")]:
            if name not in {WINDOWS_SIGNALS!r}:
                delattr(signal, name)
        assert not hasattr(signal, "SIGKILL")
        sys.platform = "win32"
        import app.core.children.python_child, app.core.children.commands, app.core.children.windows_job
        import app.tools.connection, app.tools.pool, app.documents.limited_child, app.documents.embedding
        from app.core.children.in_child import ChildLimits, child_main
        ran = []
        child_main(os.getpid(), ChildLimits(memory_bytes=2**30, lower_priority=True, ignore_interrupt=True),
                   ran.append, ("ran",))
        print(*ran)
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr
