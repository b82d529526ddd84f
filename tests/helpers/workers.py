"""How the suite shares pytest-xdist workers (scripts/test.py: -n 2 --dist loadfile): what runs in one worker, what first.

A test file is one unit of work, so a module's fixtures (a loaded model, an Xvfb, a campaign's run) are
made once, and a file's fixed ports and names are never used twice at once. A folder listed in
ONE_WORKER_FOLDERS is one unit: its session fixture costs a minute or more (tests/frozen: the
PyInstaller build), and each worker would make its own. Files with a test marked `slow` or `frozen`
start first, in the order collected, so that none of them is left to run alone at the end of the run.
Without xdist (a run without -n, or without the package) nothing here does anything.
"""

from __future__ import annotations

import pytest

# Folders whose tests share one session fixture that takes a minute or more to make.
ONE_WORKER_FOLDERS = ("tests/frozen/",)
LONG_MARKERS = ("slow", "frozen")


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its folder when listed above, else its file."""
    path = nodeid.split("::", 1)[0]
    return next((folder for folder in ONE_WORKER_FOLDERS if path.startswith(folder)), path)


def _by_file(config: pytest.Config) -> bool:
    return getattr(config.option, "dist", "no") == "loadfile"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In each worker (all collect the same list, in the same order): the long units first. (A worker no
    longer knows the --dist it serves: under any, an order of its own is all a test may expect.)"""
    if not hasattr(config, "workerinput"):
        return
    long_units = {unit_of(item.nodeid) for item in items
                  if any(item.get_closest_marker(name) for name in LONG_MARKERS)}
    items.sort(key=lambda item: unit_of(item.nodeid) not in long_units)  # stable: the rest keep their order


try:
    from xdist.scheduler import LoadFileScheduling
except ImportError:  # the test extra without pytest-xdist: runs are serial
    pass
else:

    class _UnitScheduling(LoadFileScheduling):
        """xdist's file scheduling with ONE_WORKER_FOLDERS as single units, handed out in collection order
        (not xdist's largest-count-first, which would leave the long units, few tests each, to the end)."""

        def __init__(self, config: pytest.Config, log=None) -> None:
            super().__init__(config, log)
            config.option.loadscopereorder = False

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
        return _UnitScheduling(config, log) if _by_file(config) else None
