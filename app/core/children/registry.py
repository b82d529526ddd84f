"""Kestrel's running children, so that none outlives it: at exit, and on an explicit close, each is asked
to end, given a moment, then killed with what it started.

Every child the supervisor starts or wraps is registered here until its owner ends it (PythonChild,
CommandChild). This covers the ends Python runs (a normal exit, an exception out of main, a window
closed with work going on); for the ends it cannot run (SIGKILL, a crash), see the package's docstring.
"""

from __future__ import annotations

import atexit
import importlib
import threading
import time
from typing import Protocol

# multiprocessing's own exit handler sends SIGTERM to its daemonic children and then waits for them: for
# ever, for one that is stopped or ignores SIGTERM. atexit runs the last-registered handler first, so
# multiprocessing's is registered (by importing the module that holds it) before this module's.
importlib.import_module("multiprocessing.util")

# How often end_all_children looks whether the children it asked to end are gone.
_POLL_S = 0.02


class Supervised(Protocol):
    """One registered child, as the registry ends it."""

    @property
    def grace_s(self) -> float:
        """How long the child may take to end once asked, before it is killed."""
        ...

    def ask_to_end(self) -> None:
        """SIGTERM (to its process group, where it has one of its own): the gentle way."""

    def has_ended(self) -> bool:
        """Whether the child is gone (what it started may not be: kill() ends that too)."""
        ...

    def kill(self) -> None:
        """End the child and everything it started, at once; nothing when nothing is left."""


_lock = threading.Lock()
_live: set[Supervised] = set()


def register(child: Supervised) -> None:
    """Watch over child until release(child); children already gone are forgotten."""
    with _lock:
        _live.difference_update([known for known in _live if known.has_ended()])
        _live.add(child)


def release(child: Supervised) -> None:
    """Its owner has ended it: forget it (nothing when it is not registered)."""
    with _lock:
        _live.discard(child)


def running() -> list[Supervised]:
    """The registered children that are still running."""
    with _lock:
        return [child for child in _live if not child.has_ended()]


def end_all_children() -> None:
    """Ask every registered child to end, wait for each at most its grace, then kill what is left of each
    (a stopped or deaf child too); afterwards nothing is registered. Runs at interpreter exit."""
    with _lock:
        children = list(_live)
        _live.clear()
    started = time.monotonic()
    for child in children:
        if not child.has_ended():
            child.ask_to_end()
    waiting = [child for child in children if not child.has_ended()]
    while waiting:
        waiting = [child for child in waiting if not child.has_ended() and time.monotonic() - started < child.grace_s]
        if waiting:
            time.sleep(_POLL_S)
    for child in children:
        child.kill()


atexit.register(end_all_children)
