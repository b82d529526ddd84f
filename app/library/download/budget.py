"""How long and how often one file is tried, and how much of it may be written: constants, not
settings, each with its reason. DownloadOptions carries them, so tests can shorten them.

A try fails when the connection drops, the server answers 5xx, nothing (or almost
nothing) arrives for STALL_S, or the answer's headers take longer than CONNECT_S. What
counts as progress is the part growing PROGRESS_BYTES (or a sixteenth of a smaller file)
past the furthest it ever got: a
server that sends the same first bytes again and again (Range ignored, the part thrown
away) or a kilobyte per try makes none. A healthy transfer is never cut; the budgets
only decide whether a failed try is tried again.
"""

from __future__ import annotations

import time
from typing import Callable

# Connecting and receiving an answer's headers, in all. A server that has not answered
# within this is not going to: browsers and package managers give up on a silent server
# at around the same point, and a user watching "0 %" wants to hear sooner.
CONNECT_S = 15.0
# Looking up a host's name. A resolver answers in milliseconds (tens of milliseconds from a
# far server); one with no network behind it can wait five seconds per server and try
# twice. Offline, the user should hear so within about three seconds. A lookup that took
# longer goes on in the background, and where the system keeps names it looked up
# (Windows, macOS, systemd-resolved) the next try finds the answer at once.
LOOKUP_S = 2.5
# The body: no byte for this long, or fewer than STALL_BYTES over this long (< 1 kB/s),
# is one failed try. Long enough for a CDN's hiccup; short enough that a server which
# sends a kilobyte and stops is given up on in about a minute and a half.
STALL_S = 20.0
STALL_BYTES = 16 * 1024
# The waits between tries that made no progress; one try more than waits. Three failed
# tries in a row without a megabyte arriving means the server or the network is down,
# and longer waits only postpone the message that says so.
RETRY_DELAYS = (1.0, 2.0, 4.0)
PROGRESS_BYTES = 1024 * 1024
# A busy server (429, 503) may say how long to wait (Retry-After); that long is waited
# instead, up to this. A longer wait is final, with the time in the message: holding a
# download open for an hour helps no one, and the part is kept for a later try.
LONGEST_WAIT_S = 60.0
# Failed tries of one file in all, progress or not: a connection that drops twenty times
# in one file is not a network having a bad minute. The part is kept for a later try.
TRIES_IN_ALL = 20
# A failure after this long is final: ten minutes, plus the time the file needs at
# 100 kB/s (slower than any broadband line; a 4 GB model gets about 11 hours).
FILE_TIME_S = 600.0
SLOWEST_BYTES_PER_S = 100_000
# With no size stated by the catalog or the server, a body is cut here: Hugging Face
# refuses files over 50 GB, so no model file there is bigger, and an endless body must
# end before the disk fills (the room left on the disk is a limit too).
UNSTATED_CAP = 64 * 1024**3
# A .gguf file's header says where the file ends (gguf_extent.py), and a body is cut
# there whatever a server states. The longest headers of real models (vocabularies of
# 250,000 tokens and their merges) run to about 15 MB: one still going on after this is
# not a model's, and the body stops.
GGUF_HEADER_LIMIT = 64 * 1024**2
# Bytes that are no GGUF model at all (a sign-in page, an error message, another format)
# arrive whole while they are this small, so that the model check can say what they are;
# a bigger or endless body of them stops at once, or at this size when none was stated.
UNREADABLE_GGUF_LIMIT = 16 * 1024**2
# Disk room kept free beyond the download: a share of the file (file systems round up
# to blocks and keep their own records, and a bigger file is worth more slack), and at
# least a floor for Kestrel's history and settings writes and the rest of the computer.
SPACE_FLOOR = 16 * 1024 * 1024
SPACE_SHARE = 0.02


class FileBudget:
    """The tries and time one file has used; asked after each failed try whether to go on."""

    def __init__(self, retry_delays: tuple[float, ...], progress_bytes: int, tries_in_all: int,
                 time_s: float, slowest_bytes_per_s: float, on_disk: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._delays = retry_delays
        self._progress_bytes = progress_bytes
        self._tries_in_all = tries_in_all
        self._time_s = time_s
        self._slowest = slowest_bytes_per_s
        self._clock = clock
        self._started = clock()
        self._furthest = on_disk
        self._in_a_row = 0
        self.failed = 0

    def failed_try(self, on_disk: int, size: int | None) -> float | None:
        """Count a failed try; the wait before the next one, or None when the budget is spent."""
        self.failed += 1
        # A sixteenth of a file smaller than 16 MB counts too, so its tries can progress.
        step = self._progress_bytes if size is None else min(self._progress_bytes, max(size // 16, 1))
        progressed = on_disk >= self._furthest + step
        self._furthest = max(self._furthest, on_disk)
        self._in_a_row = 0 if progressed else self._in_a_row + 1
        spent = (self._in_a_row > len(self._delays) or not self._delays or self.failed >= self._tries_in_all
                 or self._clock() - self._started > self._time_s + (size or 0) / self._slowest)
        return None if spent else self._delays[max(self._in_a_row, 1) - 1]

    def paused_for(self, seconds: float) -> None:
        """Time the user held the download paused is not time the server used."""
        self._started += seconds


def space_margin(needed: int, floor: int, share: float) -> int:
    """The room to keep free beyond a download of `needed` bytes."""
    return max(floor, int(needed * share))
