"""A cgroup of its own for a command child (an MCP server), on Linux where the system lets Kestrel make one.

Kestrel makes it below the cgroup v2 folder it runs in (a desktop session gives each app such a
folder, delegated to the user; root may write anywhere), the launcher moves the command into it
before the command runs, and cgroup.kill (Linux 5.14+) ends the command and everything it started at
once, however they detached. The launcher's supervisor kills it when the command ends, is ended or
Kestrel dies; Kestrel kills it again when it ends the child (app/core/children/commands.py), and on
the next start removes any left by a Kestrel and a supervisor that were both killed. Where no cgroup
can be made the supervisor alone keeps the tree within reach (app/core/children/launcher.py).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil

# Named as the first Kestrel to make them named them (for its MCP servers), so that a newer one still
# removes what an older one left.
_PREFIX = "kestrel-mcp-"
# How long end_cgroup waits for the killed processes to leave before removing the folder.
_EMPTY_S = 2.0


def own_cgroup() -> Path | None:
    """The cgroup v2 folder this process runs in, or None (not Linux, no cgroup v2 mounted)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
        mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    relative = next((line[3:] for line in lines if line.startswith("0::")), None)
    for mount in mounts:
        fields = mount.split()
        separator = fields.index("-") if "-" in fields else -1
        if relative is None or separator < 0 or fields[separator + 1:separator + 2] != ["cgroup2"]:
            continue
        root, point = fields[3], fields[4]
        inside = relative[len(root):] if root != "/" and relative.startswith(root) else relative
        folder = Path(point) / inside.lstrip("/")
        if folder.is_dir():
            return folder
    return None


def make_cgroup(token: str) -> Path | None:
    """A new cgroup for one command child below Kestrel's own, or None where the system does not allow it
    (not writable, cgroup.kill missing: an older kernel)."""
    parent = own_cgroup()
    if parent is None:
        return None
    _remove_abandoned(parent)
    folder = parent / f"{_PREFIX}{os.getpid()}-{token[:12]}"
    try:
        folder.mkdir()
    except OSError:
        return None  # read-only (a container), not delegated to this user
    if not (folder / "cgroup.kill").exists() or not os.access(folder / "cgroup.procs", os.W_OK):
        end_cgroup(folder)
        return None
    return folder


def end_cgroup(folder: Path | None) -> None:
    """Kill everything in the cgroup and remove it; nothing when it is already gone."""
    if folder is None or not folder.is_dir():
        return
    try:
        (folder / "cgroup.kill").write_text("1", encoding="ascii")
    except OSError:
        pass  # gone meanwhile, or a kernel without cgroup.kill: then it was never used
    deadline = time.monotonic() + _EMPTY_S
    while True:
        try:
            folder.rmdir()  # refused (EBUSY) until the killed processes have left
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return  # a process stuck in the kernel: the next start removes the folder
            time.sleep(0.01)


def _remove_abandoned(parent: Path) -> None:
    """Cgroups left by a Kestrel that is gone (killed together with the supervisors)."""
    try:
        folders = [folder for folder in parent.iterdir() if folder.name.startswith(_PREFIX)]
    except OSError:
        return
    for folder in folders:
        owner = folder.name[len(_PREFIX):].partition("-")[0]
        if owner.isdigit() and int(owner) != os.getpid() and not psutil.pid_exists(int(owner)):
            end_cgroup(folder)
