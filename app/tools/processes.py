"""Starting stdio servers so that none outlives Kestrel, and keeping the last lines they write on stderr."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import threading
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

import psutil

from app.tools import launcher

# Set in each stdio server's environment, so Kestrel can tell which of its children it is: the SDK
# does not hand out the process it starts.
TOKEN_VARIABLE = "KESTREL_MCP_SERVER"
STDERR_LINES = 40
# A line longer than this is cut: a server that dumps a megabyte without a newline keeps the buffer small.
_LINE_CHARS = 500


def launch_command(command: str, args: Sequence[str], cgroup: Path | None = None) -> tuple[str, list[str]]:
    """The command line that starts a server: on Linux through launcher.py, a supervisor that ends the
    server and everything it started when it ends or Kestrel dies (PR_SET_PDEATHSIG, a child subreaper),
    in `cgroup` when Kestrel could make one (server_cgroup.py); elsewhere as it is.

    A frozen build has no Python to run launcher.py with, so there the server is started directly and
    only close() and the end of its stdin end it (docs/design.md, "Tools (MCP)"). Windows: the SDK's
    job object (KILL_ON_JOB_CLOSE) holds the server and all it starts, and Kestrel's end closes it.
    """
    if uses_launcher():
        where = ["--cgroup", str(cgroup)] if cgroup is not None else []
        return sys.executable, ["-I", "-S", launcher.__file__, str(os.getpid()), *where, command, *args]
    return command, list(args)


def uses_launcher() -> bool:
    return sys.platform.startswith("linux") and not getattr(sys, "frozen", False)


def find_command(command: str, env: Mapping[str, str]) -> str | None:
    """Where the command is, looked for on the PATH the server will get; None when it is not there."""
    path = env.get("PATH", os.environ.get("PATH", os.defpath))
    if os.path.dirname(command):
        return command if Path(command).is_file() else None
    return shutil.which(command, path=path)


def new_token() -> str:
    return uuid.uuid4().hex


def find_server_pid(token: str) -> int | None:
    """The pid of the child started with this token in its environment; None when it is already gone."""
    for child in psutil.Process().children():
        try:
            if child.environ().get(TOKEN_VARIABLE) == token:
                return int(child.pid)
        except psutil.Error:
            continue
    return None


def end_process_group(pid: int | None, token: str) -> None:
    """Kill what is left of a stdio server's process group (POSIX).

    The SDK starts each server in a session of its own, so its pid is the group's id, but when the
    server exits on its own after its stdin closes it leaves its children (npx's node, uv's python)
    running: those are ended here. Only a group that still holds a process with the server's token
    is killed: a server that died long ago may have had its pid reused. Windows: the SDK's job object
    (KILL_ON_JOB_CLOSE) does this.
    """
    if pid is None or os.name != "posix" or not _group_is_ours(pid, token):
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the whole group is gone already


def _group_is_ours(pgid: int, token: str) -> bool:
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and process.environ().get(TOKEN_VARIABLE) == token:
                return True
        except (OSError, psutil.Error):
            continue  # gone meanwhile, or not ours to read
    return False


class StderrTail:
    """A pipe a server writes its stderr into; a daemon thread keeps its last lines.

    A thread, not the event loop, reads it: the same code serves Windows pipes, and a server that
    writes a lot to stderr never waits on Kestrel's loop.
    """

    def __init__(self, lines: int = STDERR_LINES) -> None:
        read_fd, write_fd = os.pipe()
        self._writer: TextIO = open(write_fd, "w", encoding="utf-8", errors="replace")
        self._lines: deque[str] = deque(maxlen=lines)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(read_fd,), daemon=True, name="mcp stderr")
        self._thread.start()

    @property
    def writer(self) -> TextIO:
        """The end to give the server as its stderr."""
        return self._writer

    def close_writer(self) -> None:
        """Close Kestrel's copy once the server has its own, so the pipe ends when the server does."""
        self._writer.close()

    def lines(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._lines)

    async def settled(self, seconds: float = 0.5) -> None:
        """Wait (a little) for the last lines of a server that has ended to be read."""
        deadline = asyncio.get_running_loop().time() + seconds
        while self._thread.is_alive() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)

    def _read(self, fd: int) -> None:
        with open(fd, "rb") as pipe:
            while chunk := pipe.readline(_LINE_CHARS * 4):
                text = chunk.decode("utf-8", "replace").rstrip("\r\n")
                if text.strip():
                    with self._lock:
                        self._lines.append(text[:_LINE_CHARS])
