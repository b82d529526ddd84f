"""A second launch of the window hands over to the first before Qt, the service or any command is imported.

Under load (two busy cores) a second `kestrel` spent 16 s importing Qt and every part of the window,
and making a QApplication, only to find the first window's lock taken: each of those seconds was also
taken from the first window as it started. Here the second needs the lock file, the line's socket and
a few standard modules (about 0.03 s of imports), and sleeps while it waits for the first to answer.
"""

from __future__ import annotations

import time

from app.core.files import try_hold_lock
from app.core.instance_line import Delivery, Do, LineRequest, deliver
from app.core.paths import data_paths

# The window holds this for its life (app/ui/single_instance.py): the one sign that it runs.
WINDOW_LOCK = ".window.lock"
# A first window started a moment ago listens only once its event loop runs (seconds on a busy machine):
# the second waits this long for it before the window's own path tries again and says so.
WAIT_S = 10.0
_RETRY_S = 0.05  # the lock is held but nothing listens yet: the first is still starting


def hand_over_early(background: bool, wait_s: float = WAIT_S) -> int | None:
    """If a Kestrel window already runs on this home: ask it to come forward (at sign-in, `background`,
    leave it as it is) and give the exit status. None when no window runs, or it did not answer within
    wait_s: then this launch goes on to the window's own start, which finds out again and acts."""
    paths = data_paths()
    lock = paths.data / WINDOW_LOCK
    if not lock.exists():  # a first start ever, or a home no window ever ran on: make nothing here
        return None
    try:
        held = try_hold_lock(lock)
    except OSError:
        return None  # a folder this user cannot write: the window's start says so in words
    if held is not None:
        held.release()  # no window runs: this launch is the window (it takes the lock again)
        return None
    if background:
        return 0
    deadline = time.monotonic() + wait_s
    while (left := deadline - time.monotonic()) > 0:
        # One connection waits for the answer as long as there is time: a window that listens but is
        # still building hears it the moment its event loop runs.
        delivery = deliver(paths, LineRequest(Do.ACTIVATE), timeout_s=left)
        if delivery is Delivery.HEARD:
            return 0
        if delivery is not Delivery.NOT_RUNNING:
            return None  # stuck, or a Kestrel of another version: the window's path says so
        time.sleep(_RETRY_S)
    return None
