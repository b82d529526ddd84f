"""Receiving one answer's body into a part: never past the size stated, never waiting on a stall."""

from __future__ import annotations

import http.client
import time
from dataclasses import dataclass
from typing import BinaryIO, Callable

from app.core.units import human_size
from app.library.download.control import DownloadControl
from app.library.download.errors import DownloadError, DownloadErrorKind
from app.library.download.part import PartFile
from app.library.download.transport import Answer, TransientFailure, describe


@dataclass(frozen=True)
class Limit:
    """Where the part must end: the size stated (by size_source), or a cap when none was.

    by_disk says the cap is the room the disk has left, not the cap for unstated sizes.
    """

    size: int
    stated: bool
    size_source: str = "the server"
    by_disk: bool = False


@dataclass(frozen=True)
class StallRule:
    """No byte for seconds, or fewer than min_bytes over seconds, is a stall."""

    seconds: float
    min_bytes: int


def receive(answer: Answer, part: PartFile, out: BinaryIO, limit: Limit, stall: StallRule,
            chunk_size: int, control: DownloadControl, arrived: Callable[[int], None]) -> None:
    """Append the body to the part until it ends or the part reaches the limit.

    TransientFailure when the body stalls or ends before what its headers announced;
    DownloadError when the server sends past the limit (the part is deleted, or kept
    when the disk is what ran out).
    """
    answer.body_timeout(stall.seconds)
    response = answer.response
    announced = response.length
    window_start, window_bytes = time.monotonic(), 0
    while part.length < limit.size:
        control.checkpoint()
        block = _read(response, min(chunk_size, limit.size - part.length), stall)
        if not block:
            break
        part.write(out, block)
        arrived(len(block))
        window_bytes += len(block)
        now = time.monotonic()
        if now - window_start >= stall.seconds:
            if window_bytes < stall.min_bytes:
                raise TransientFailure(f"almost nothing arrived for {stall.seconds:g} s "
                                       f"({human_size(window_bytes)})")
            window_start, window_bytes = now, 0
    if part.length >= limit.size:
        if _more_follows(response, stall):
            _past_the_limit(part, limit)
        return
    if announced is not None and response.length:
        total = limit.size if limit.stated else part.length + response.length
        raise TransientFailure(f"it ended {part.name} at {human_size(part.length)} of the "
                               f"{human_size(total)} it stated", server_fault=True)


def _read(response: http.client.HTTPResponse, count: int, stall: StallRule) -> bytes:
    try:
        return response.read1(count)
    except TimeoutError:
        raise TransientFailure(f"nothing arrived for {stall.seconds:g} s") from None
    except (OSError, http.client.HTTPException) as exc:
        raise TransientFailure(describe(exc)) from None


def _more_follows(response: http.client.HTTPResponse, stall: StallRule) -> bool:
    """Whether the body goes on past what was wanted: announced, or one more byte arrives."""
    if response.length is not None:
        return response.length > 0
    try:
        return bool(response.read1(1))
    except (OSError, http.client.HTTPException):  # silence or a hang-up at the end: the end
        return False


def _past_the_limit(part: PartFile, limit: Limit) -> None:
    if limit.stated:
        said = "it stated" if limit.size_source == "the server" else f"{limit.size_source} gives for it"
        part.damaged(f"the server sent more than the {human_size(limit.size)} {said}")
    if limit.by_disk:
        raise DownloadError(DownloadErrorKind.DISK_FULL,
                            f"The server did not say how big {part.name} is, and it kept "
                            f"sending until the disk had only the room Kestrel keeps free. "
                            f"What arrived ({human_size(part.length)}) is kept: free some "
                            f"space, then start the download again to continue.")
    part.damaged(f"the server kept sending it past {human_size(limit.size)} without saying "
                 f"how big it is, and no model file is that big")
