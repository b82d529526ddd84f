"""How far Kestrel can end what its MCP servers start, in words (for `kestrel doctor`).

The containment itself is the supervisor's: a launcher process and a cgroup per server on Linux
(app/core/children/launcher.py, app/core/children/cgroup.py), the SDK's job object on Windows.
"""

from __future__ import annotations

import sys

from app.core.children.cgroup import end_cgroup, make_cgroup


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
    probe = make_cgroup("probe")
    end_cgroup(probe)
    if probe is not None:
        return ("Each MCP server runs in a cgroup of its own under a supervisor: everything it starts ends with it, "
                "and with Kestrel, however Kestrel ends.")
    return ("Each MCP server runs under a supervisor that ends everything it starts, with it and with Kestrel, "
            "however Kestrel ends. Kestrel cannot make cgroups here (its cgroup is not writable), so should the "
            "supervisor itself be killed, what the server started may keep running.")
