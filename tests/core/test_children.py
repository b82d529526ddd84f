"""The supervisor of child processes (app/core/children) on real processes: the limits a child runs under,
the death signal that ends it with a SIGKILLed Kestrel, and its group ended when it is closed or at exit.

The Windows job object is tested on a recorded kernel32 in test_children_windows.py; the owners' own
behaviour (engine, reader, image check, embedding, MCP servers) in their folders' tests."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

import psutil
import pytest

from app.core.children import registry
from app.core.children.in_child import ChildLimits
from app.core.children.python_child import PythonChild, start_python_child

ROOT = Path(__file__).resolve().parents[2]
LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
POSIX = pytest.mark.skipif(os.name != "posix", reason="signals and process groups are POSIX's")
GONE_WITHIN_S = 10
# A sleeper that ignores SIGTERM, as a process stuck in native code may: only SIGKILL ends it.
DEAF_SLEEPER = ("import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(os.getpid(), flush=True); "
                "time.sleep(600)")


def report_limits(conn: Connection) -> None:
    """In the child: what it runs under, then wait for the parent's word to end."""
    import resource

    death_signal = ctypes.c_int()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(2, ctypes.byref(death_signal))  # PR_GET_PDEATHSIG
    conn.send({"death signal": death_signal.value, "address space": resource.getrlimit(resource.RLIMIT_AS)[0],
               "niceness": os.nice(0), "ignores Ctrl+C": signal.getsignal(signal.SIGINT) == signal.SIG_IGN})
    conn.recv()


def deaf_with_a_grandchild(conn: Connection) -> None:
    """In the child: SIGTERM ignored, a deaf grandchild started, its pid sent; then it sleeps, never reading its pipe."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    grandchild = subprocess.Popen([sys.executable, "-c", DEAF_SLEEPER], stdout=subprocess.PIPE, text=True)
    assert grandchild.stdout is not None
    conn.send(int(grandchild.stdout.readline()))
    time.sleep(600)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids: list[int]) -> list[int]:
    """The pids still alive after the wait."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline and not all(_gone(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if not _gone(pid)]


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _started_from_a_thread_that_ends(limits: ChildLimits) -> tuple[PythonChild, Connection, dict[str, object]]:
    """A child started by a worker thread that ends once the child has reported (its death signal set by then)."""
    started: list[tuple[PythonChild, Connection, dict[str, object]]] = []

    def start() -> None:
        child, conn = start_python_child(report_limits, (), name="kestrel-test", limits=limits)
        started.append((child, conn, conn.recv() if conn.poll(60) else {}))

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    return started[0]


@POSIX
def test_a_child_runs_under_its_limits_and_outlives_the_thread_that_started_it() -> None:
    capped = ChildLimits(memory_bytes=1536 * 2**20, lower_priority=True, ignore_interrupt=True)
    for limits in (capped, ChildLimits()):
        child, conn, seen = _started_from_a_thread_that_ends(limits)
        try:
            assert seen, "the child never reported"
            time.sleep(0.5)  # Linux sends the death signal when the thread that started a child ends
            assert child.is_alive(), "the child died with the thread that asked for it"
            assert child in registry.running()
            conn.send("end")
            child.end(grace_s=30)
            assert child.exitcode == 0
            assert child not in registry.running()
        finally:
            child.end()
            conn.close()
        assert seen["death signal"] == (signal.SIGKILL if sys.platform.startswith("linux") else 0)
        if limits is capped:
            assert seen["address space"] == 1536 * 2**20
            assert seen["niceness"] == os.nice(0) + 5 or seen["niceness"] == 19  # 19: as nice as it gets
            assert seen["ignores Ctrl+C"]
        else:
            import resource
            assert seen["address space"] == resource.getrlimit(resource.RLIMIT_AS)[0]
            assert seen["niceness"] == os.nice(0) and not seen["ignores Ctrl+C"]


@POSIX
def test_a_child_of_a_sigkilled_kestrel_is_ended_by_the_death_signal() -> None:
    """The child ignores SIGTERM and never reads its pipe, so nothing but the death signal (or, off Linux, its
    watch on its parent) can end it when the parent is killed."""
    script = textwrap.dedent("""
        import sys, time
        from app.core.children.python_child import start_python_child
        from tests.core.test_children import deaf_with_a_grandchild
        child, conn = start_python_child(deaf_with_a_grandchild, (), name="kestrel-test-orphan")
        print(child.pid, conn.recv(), flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    child = grandchild = 0
    try:
        assert parent.stdout is not None
        child, grandchild = (int(pid) for pid in parent.stdout.readline().split())
        assert not _gone(child)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        if parent.stdout is not None:
            parent.stdout.close()
    try:
        assert _wait_gone([child]) == [], "the child outlived its killed parent"
    finally:
        _kill(child)
        _kill(grandchild)  # the death signal reaches Kestrel's own children only


@LINUX
def test_a_child_whose_parent_died_while_it_started_does_not_run() -> None:
    """The parent-still-alive check after the death signal is set: a parent that is not this process's
    parent any more (here: pid 1, never the parent of a test's child) means Kestrel is gone."""
    code = "from app.core.children.in_child import die_with_kestrel; die_with_kestrel(1); print('ran')"
    orphan = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (orphan.returncode, orphan.stdout) == (1, "")
    code = f"from app.core.children.in_child import die_with_kestrel; die_with_kestrel({os.getpid()}); print('ran')"
    ours = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (ours.returncode, ours.stdout) == (0, "ran\n")


@POSIX
def test_end_kills_a_child_that_does_not_exit_when_asked_and_what_it_started() -> None:
    child, conn = start_python_child(deaf_with_a_grandchild, (), name="kestrel-test-deaf")
    grandchild = 0
    try:
        assert conn.poll(60)
        grandchild = conn.recv()
        child.end(grace_s=0.2)  # as an owner does after asking over the pipe: this child does not listen
        assert child.exitcode == -signal.SIGKILL
        assert _wait_gone([grandchild]) == []
        child.end()  # again: nothing left to do
    finally:
        child.end()
        conn.close()
        if grandchild:
            _kill(grandchild)


# Stands in for Kestrel: a Python child and a command child, each deaf to SIGTERM with a deaf program of
# its own, neither ended by its owner; prints their pids (the command child's: its launcher's on Linux).
LEFT_RUNNING = f"""
import os, subprocess, sys
from app.core.children import registry
from app.core.children.commands import CommandChild
from app.core.children.python_child import start_python_child
from tests.core.test_children import deaf_with_a_grandchild
python_child, conn = start_python_child(deaf_with_a_grandchild, (), name="kestrel-test-left")
command = CommandChild("KESTREL_TEST_CHILD")
starts_a_sleeper = ("import subprocess, sys, time; "
                    "p = subprocess.Popen([sys.executable, '-c', {DEAF_SLEEPER!r}], stdout=subprocess.PIPE, text=True); "
                    "print(p.stdout.readline().strip(), flush=True); time.sleep(600)")
line = command.command_line(sys.executable, ["-c", starts_a_sleeper])
# As the MCP SDK starts a stdio server: in a session of its own, with the child's environment.
server = subprocess.Popen([line[0], *line[1]], env={{**os.environ, **command.environment}}, start_new_session=True,
                          stdout=subprocess.PIPE, text=True)
command.started()
assert command.pid == server.pid
print(python_child.pid, conn.recv(), server.pid, server.stdout.readline().strip(), flush=True)
"""


def _run_kestrel(script: str) -> list[int]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 60
    return [int(pid) for pid in done.stdout.split()]


@POSIX
def test_closing_ends_every_registered_child_with_what_it_started() -> None:
    """end_all_children, called by hand (as an owner of them all may): nothing is left registered, and all
    is gone while Kestrel runs on (the killed are waited for here; the pids printed are checked after)."""
    pids = _run_kestrel(LEFT_RUNNING + textwrap.dedent("""
        registry.end_all_children()
        assert registry.running() == []
        assert python_child.wait(10) == -9 and server.wait(timeout=10) != 0
        python_child.end()
    """))
    try:
        assert len(pids) == 4
        assert _wait_gone(pids) == []
    finally:
        for pid in pids:
            _kill(pid)


@POSIX
def test_children_left_running_are_ended_when_kestrel_exits() -> None:
    """The exit ends them instead of waiting for them (multiprocessing's own exit handler would wait for
    ever for a child that ignores SIGTERM)."""
    pids = _run_kestrel(LEFT_RUNNING)
    try:
        assert len(pids) == 4
        assert _wait_gone(pids) == []
    finally:
        for pid in pids:
            _kill(pid)
