"""A cgroup of its own for each stdio MCP server, on Linux where the system lets Kestrel make one.

Kestrel makes it below the cgroup v2 folder it runs in (a desktop session gives each app such a
folder, delegated to the user; root may write anywhere), the launcher moves the server into it
before the server runs, and cgroup.kill (Linux 5.14+) ends the server and everything it started at
once, however they detached. The launcher's supervisor kills it when the server ends, is ended or
Kestrel dies; Kestrel kills it again on close, and on the next start removes any left by a Kestrel
and a supervisor that were both killed. Where no cgroup can be made the supervisor alone keeps the
tree within reach (app/tools/launcher.py); `containment()` says which holds, in words.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil

_PREFIX = "kestrel-mcp-"
# How long close() waits for the killed processes to leave before removing the folder.
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


def make_server_cgroup(token: str) -> Path | None:
    """A new cgroup for one server below Kestrel's own, or None where the system does not allow it
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
        end_server_cgroup(folder)
        return None
    return folder


def end_server_cgroup(folder: Path | None) -> None:
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


def containment() -> str:
    """How far Kestrel can end what its MCP servers start, in words (for `kestrel doctor`)."""
    if sys.platform == "win32":
        return ("Each MCP server runs in a Windows job object that is closed when Kestrel ends, however it ends: "
                "everything the server started ends with it.")
    if not sys.platform.startswith("linux"):
        return ("Kestrel ends each MCP server and its process group when it closes, but a program a server starts "
                "in a session of its own, and every server of a Kestrel that is killed, may keep running "
                "(macOS has no way to tie them to Kestrel).")
    if getattr(sys, "frozen", False):
        return ("Kestrel ends each MCP server and its process group when it closes, but a program a server starts "
                "in a session of its own may keep running, and a killed Kestrel leaves its servers to end when "
                "they see their input close (this build cannot run the supervisor that ties them to Kestrel).")
    probe = make_server_cgroup("probe")
    end_server_cgroup(probe)
    if probe is not None:
        return ("Each MCP server runs in a cgroup of its own under a supervisor: everything it starts ends with it, "
                "and with Kestrel, however Kestrel ends.")
    return ("Each MCP server runs under a supervisor that ends everything it starts, with it and with Kestrel, "
            "however Kestrel ends. Kestrel cannot make cgroups here (its cgroup is not writable), so should the "
            "supervisor itself be killed, what the server started may keep running.")


def _remove_abandoned(parent: Path) -> None:
    """Cgroups left by a Kestrel that is gone (killed together with the supervisors)."""
    try:
        folders = [folder for folder in parent.iterdir() if folder.name.startswith(_PREFIX)]
    except OSError:
        return
    for folder in folders:
        owner = folder.name[len(_PREFIX):].partition("-")[0]
        if owner.isdigit() and int(owner) != os.getpid() and not psutil.pid_exists(int(owner)):
            end_server_cgroup(folder)
