"""What a Python child of Kestrel does before its own work: tie its life to Kestrel's, then take on its limits.

Runs in the spawned child, so it imports only the standard library and the launcher's death signal:
the owner's target (the engine's request loop, a reader's loop) is called last, under everything set here.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.core.children.launcher import die_with_parent

# Where no death signal exists (macOS), how often a child looks whether Kestrel is still its parent.
_WATCH_S = 1.0
# Niceness added by lower_priority: below the window and the engine, still well above idle.
_NICER = 5


@dataclass(frozen=True)
class ChildLimits:
    """What one child runs under, as its owner sets it.

    memory_bytes: a cap on the child's memory (None: none). Linux and macOS: its address space
    (RLIMIT_AS), so an allocation past it fails (MemoryError, or a parser that dies) instead of the
    machine swapping; Windows: the committed memory of its job object (app/core/children/windows_job.py).
    lower_priority: work that runs beside chat (reading, checking images) gives way to the engine and
    the window on a busy machine.
    ignore_interrupt: Ctrl+C in a terminal reaches the whole process group; the parent decides when
    this child ends, so it must not die of it.
    """

    memory_bytes: int | None = None
    lower_priority: bool = False
    ignore_interrupt: bool = False


def child_main(parent_pid: int, limits: ChildLimits, target: Callable[..., None], args: tuple[Any, ...]) -> None:
    """The spawned child's entry (module-level, so it is pickled by name): target(*args) under limits,
    in a child that ends when Kestrel (parent_pid) does, however Kestrel ends."""
    if limits.ignore_interrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_kestrel(parent_pid)
    if limits.memory_bytes is not None:
        cap_address_space(limits.memory_bytes)
    if limits.lower_priority:
        lower_priority()
    target(*args)


def die_with_kestrel(parent_pid: int) -> None:
    """Linux: the death signal (SIGKILL, which a child stuck in native code cannot ignore), set, then
    checked: a Kestrel that died while this child started is not waited for. Windows: nothing to do here,
    the job object Kestrel put this child in ends it. Elsewhere (macOS) and where the kernel refuses the
    death signal: a thread that ends the child once its parent is gone."""
    if sys.platform == "win32":
        return
    if die_with_parent(parent_pid, signal.SIGKILL):
        return
    if os.getppid() != parent_pid:
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="parent-watch", daemon=True).start()


def _watch_parent(parent_pid: int) -> None:
    # A child stuck in a parser never reads its pipe's end: this ends it when its parent is gone.
    while os.getppid() == parent_pid:
        time.sleep(_WATCH_S)
    os._exit(1)


def cap_address_space(limit: int) -> None:
    """RLIMIT_AS on Linux and macOS (never above the hard limit the child was given); Windows caps the
    child through its job object instead."""
    if sys.platform == "win32":
        return
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        pass  # macOS refuses some values; the owner's time limit still stands


def lower_priority() -> None:
    """Raise this process's niceness, where the system has one (not Windows, where the child keeps its priority)."""
    if hasattr(os, "nice"):
        try:
            os.nice(_NICER)
        except OSError:
            pass
