"""Command children: programs Kestrel did not write (MCP stdio servers), started by another library's subprocess code.

The MCP SDK's stdio_client runs the Popen itself (its transport reads the pipes of the process it made,
in a session of its own), so the supervisor does what surrounds it: the command line to run (under
launcher.py on Linux, in a cgroup of its own where the system allows one), an environment token that
finds the started process among Kestrel's children, and the end of its process group and cgroup;
registered for Kestrel's exit until then. Windows: the SDK puts each server in a job object that is
killed when its handle closes, which Kestrel's end does.
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import psutil

from app.core.children import cgroup, launcher, registry


def launch_command(command: str, args: Sequence[str], cgroup_folder: Path | None = None) -> tuple[str, list[str]]:
    """The command line that starts a command child: on Linux through launcher.py, a supervisor that ends it
    and everything it started when it ends or Kestrel dies (PR_SET_PDEATHSIG, a child subreaper), in
    `cgroup_folder` when Kestrel could make one; elsewhere as it is.

    A frozen build has no Python to run launcher.py with, so there the command is started directly and only
    the end of its process group (and of its stdin) ends it."""
    if uses_launcher():
        where = ["--cgroup", str(cgroup_folder)] if cgroup_folder is not None else []
        return sys.executable, ["-I", "-S", launcher.__file__, str(os.getpid()), *where, command, *args]
    return command, list(args)


def uses_launcher() -> bool:
    return sys.platform.startswith("linux") and not getattr(sys, "frozen", False)


def find_child_pid(variable: str, token: str) -> int | None:
    """The pid of Kestrel's child started with variable=token in its environment; None when it is gone."""
    for child in psutil.Process().children():
        try:
            if child.environ().get(variable) == token:
                return int(child.pid)
        except psutil.Error:
            continue
    return None


def end_process_group(pid: int | None, variable: str, token: str, signal_number: int | None = None) -> None:
    """Send signal_number (None: SIGKILL, to kill what is left) to a command child's process group (POSIX).

    The SDK starts each server in a session of its own, so its pid is the group's id, but when the server
    exits on its own after its stdin closes it leaves its children (npx's node, uv's python) running:
    those are ended here. Only a group that still holds a process with the child's token is signalled: a
    child that died long ago may have had its pid reused. Windows: the SDK's job object does this."""
    if pid is None or os.name != "posix" or not _group_is_ours(pid, variable, token):
        return
    try:
        os.killpg(pid, signal.SIGKILL if signal_number is None else signal_number)
    except (ProcessLookupError, PermissionError):
        pass  # the whole group is gone already


def _group_is_ours(pgid: int, variable: str, token: str) -> bool:
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and process.environ().get(variable) == token:
                return True
        except (OSError, psutil.Error):
            continue  # gone meanwhile, or not ours to read
    return False


class CommandChild:
    """One command child, from its command line to its end; used by one owner (an MCP server's task).

    command_line() before the library starts it, environment in what it is started with, started() once
    it runs; then end_group() and end_cgroup() (the second blocks up to two seconds: off the event loop)."""

    # At exit a child asked to end gets what the launcher gives its command, and a little to reap it.
    grace_s = launcher.GRACE_S + 0.5

    def __init__(self, token_variable: str) -> None:
        self._variable = token_variable
        self._token = uuid.uuid4().hex
        self.pid: int | None = None
        self.cgroup: Path | None = None

    @property
    def environment(self) -> dict[str, str]:
        """What the child's environment must hold, so that started() can tell it apart."""
        return {self._variable: self._token}

    def command_line(self, command: str, args: Sequence[str]) -> tuple[str, list[str]]:
        """The command and arguments to start (launch_command), with a cgroup made for it where it runs
        under the launcher and the system allows one."""
        if uses_launcher():
            self.cgroup = cgroup.make_cgroup(self._token)  # a mkdir: not worth a thread it could outlive
        return launch_command(command, args, self.cgroup)

    def started(self) -> None:
        """The library has started it: find its pid, and end it at Kestrel's exit unless ended before."""
        self.pid = find_child_pid(self._variable, self._token)
        registry.register(self)

    def end_group(self) -> None:
        """Kill what is left of its process group."""
        end_process_group(self.pid, self._variable, self._token)

    def end_cgroup(self) -> None:
        """Kill what is left in its cgroup and remove the cgroup; the child is then let go. The supervisor has
        removed it already, unless it was killed itself: then this kills what it held."""
        cgroup.end_cgroup(self.cgroup)
        registry.release(self)

    def ask_to_end(self) -> None:
        end_process_group(self.pid, self._variable, self._token, signal.SIGTERM)

    def has_ended(self) -> bool:
        if self.pid is None:
            return True
        try:
            return bool(psutil.Process(self.pid).status() == psutil.STATUS_ZOMBIE)
        except psutil.Error:  # gone, or a reused pid that is not ours to read
            return True

    def kill(self) -> None:
        self.end_group()
        cgroup.end_cgroup(self.cgroup)
