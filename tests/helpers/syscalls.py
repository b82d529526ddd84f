"""What a process tree really does on the network, seen by the kernel (strace), not by Python.

Audit hooks see only Python's own socket module; ONNX Runtime's native telemetry thread,
llama.cpp or Qt would slip past them. strace follows every thread and child (-f) and logs
each socket-family call; anything but a Unix socket (Kestrel's own pipes between its
processes) is a finding: a DNS query needs an AF_INET/AF_INET6 datagram socket first,
a connection needs a socket, and both are logged with their address.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

CALLS = "socket,socketpair,connect,bind,sendto,sendmsg,sendmmsg"
LOCAL_FAMILIES = {"AF_UNIX", "AF_LOCAL", "PF_UNIX", "PF_LOCAL"}
_FAMILY = re.compile(r"\b(?:socket|socketpair)\((\w+)|sa_family=(\w+)")


def strace_or_skip() -> str:
    """The strace binary; CI installs it, so there a missing one fails instead of skipping."""
    found = shutil.which("strace")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("strace is not installed; .ci/run installs it (apt-get install strace)")
    pytest.skip("strace is not installed (apt-get install strace)")


def findings(log: str) -> list[str]:
    """The traced lines that name a non-local address family."""
    found = []
    for line in log.splitlines():
        for match in _FAMILY.finditer(line):
            family = match.group(1) or match.group(2)
            if family not in LOCAL_FAMILIES:
                found.append(line.strip())
                break
    return found


@dataclass
class Traced:
    returncode: int
    stdout: str
    stderr: str
    log: str

    @property
    def network(self) -> list[str]:
        return findings(self.log)


def _trace_command(log: Path, args: list[str]) -> list[str]:
    return [strace_or_skip(), "-f", "-qq", "-e", f"trace={CALLS}", "-o", str(log), *args]


def run_traced(args: list[str], tmp_path: Path, *, env: dict[str, str], cwd: Path | None = None,
               timeout: float = 120, stdin: str | None = None) -> Traced:
    """Run args to completion under strace."""
    log = tmp_path / f"strace-{time.monotonic_ns()}.log"
    result = subprocess.run(_trace_command(log, args), cwd=cwd, env=env, input=stdin, capture_output=True,
                            text=True, timeout=timeout)
    return Traced(result.returncode, result.stdout, result.stderr, log.read_text(errors="replace"))


def run_traced_for(args: list[str], tmp_path: Path, seconds: float, *, env: dict[str, str],
                   cwd: Path | None = None) -> Traced:
    """Start args under strace, let it live for `seconds`, then end it with SIGTERM.

    The signal goes to the traced program (strace's child), not to strace, so the app
    shuts down as it would when the user quits, and strace logs to the end.
    """
    log = tmp_path / f"strace-{time.monotonic_ns()}.log"
    tracer = subprocess.Popen(_trace_command(log, args), cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(seconds)
        import psutil

        for child in psutil.Process(tracer.pid).children():
            child.send_signal(signal.SIGTERM)
        stdout, stderr = tracer.communicate(timeout=60)
    finally:
        tracer.kill()
    return Traced(tracer.returncode, stdout, stderr, log.read_text(errors="replace"))


def start_traced(args: list[str], log: Path, *, env: dict[str, str], cwd: Path | None = None) -> subprocess.Popen[str]:
    """Start args under strace, logging to log; the caller reads its output and ends it
    (signal the traced program, strace's child, so that strace logs to the end)."""
    return subprocess.Popen(_trace_command(log, args), cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
