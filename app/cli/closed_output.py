"""Output into a pipe whose reader went away (`kestrel models list | head -1`): an end, not an error."""

from __future__ import annotations

import errno
import os
import stat
import sys

# What the reader of the output did not read, it did not want: the command did its part.
# README: "0 done (a list cut short by its reader, as with `| head`, too)".
EXIT_READER_GONE = 0


def output_closed(error: OSError) -> bool:
    """Whether error is a write to a pipe whose reader went away: EPIPE; on Windows, EINVAL
    while the output is a pipe (the C runtime's word for ERROR_NO_DATA there)."""
    if isinstance(error, BrokenPipeError):
        return True
    return os.name == "nt" and error.errno == errno.EINVAL and any(_is_pipe(s) for s in (sys.stdout, sys.stderr))


def end_quietly() -> int:
    """Say nothing (standard error may be the same closed pipe, and nothing went wrong) and
    give EXIT_READER_GONE.

    Python ignores SIGPIPE, so the write raised instead of ending the process as it ends
    a C tool. An output that cannot be flushed is pointed at the null device, so that
    Python's own flush of what is still buffered, at exit, does not fail a second time
    and print "Exception ignored".
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, stream.fileno())
                os.close(null)
            except (OSError, ValueError, AttributeError):
                pass  # no such stream, or no descriptor: nothing is left to flush there
    return EXIT_READER_GONE


def _is_pipe(stream: object) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(stream.fileno()).st_mode)  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError):
        return False
