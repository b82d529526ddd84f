"""A stdio server's command looked for, the variable that tells it apart, and the last lines it writes on stderr.

How it is started, contained and ended is the supervisor's (app/core/children/commands.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

# Set in each stdio server's environment (CommandChild), so Kestrel can tell which of its children it
# is: the SDK does not hand out the process it starts.
TOKEN_VARIABLE = "KESTREL_MCP_SERVER"
STDERR_LINES = 40
# A line longer than this is cut: a server that dumps a megabyte without a newline keeps the buffer small.
_LINE_CHARS = 500


def find_command(command: str, env: Mapping[str, str]) -> str | None:
    """Where the command is, looked for on the PATH the server will get; None when it is not there."""
    path = env.get("PATH", os.environ.get("PATH", os.defpath))
    if os.path.dirname(command):
        return command if Path(command).is_file() else None
    return shutil.which(command, path=path)


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
