"""Runs an MCP server for Kestrel on Linux so that the kernel ends it when Kestrel dies, even by SIGKILL.

Started as `python -I -S launcher.py KESTREL_PID COMMAND ARGS...`: it asks for PR_SET_PDEATHSIG,
which survives the exec below, then becomes the server. Standalone on purpose (no app import):
it runs before the server, so it must start in a few hundredths of a second.
"""

from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # linux/prctl.h
EXIT_NOT_RUN = 127  # what a shell gives for a command it could not run


def die_with_parent(parent_pid: int) -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies; False where that cannot be done.

    Returns False too when the parent is already gone (it died before the request took effect).
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    return os.getppid() == parent_pid


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: launcher.py PARENT_PID COMMAND [ARGS...]\n")
        return 2
    if not die_with_parent(int(argv[0])) and os.getppid() != int(argv[0]):
        return 1  # Kestrel died while this started: the server must not run without it
    try:
        os.execvp(argv[1], argv[1:])
    except OSError as exc:
        sys.stderr.write(f"{argv[1]}: {exc.strerror or exc}\n")
    return EXIT_NOT_RUN


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
