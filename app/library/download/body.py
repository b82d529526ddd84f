"""Receiving one answer's body into a part: never past the size stated, never waiting on a stall."""

from __future__ import annotations

import http.client
import time
from dataclasses import dataclass
from typing import BinaryIO, Callable, NoReturn

from app.core.units import human_size
from app.library.download.control import DownloadControl
from app.library.download.errors import DownloadError, DownloadErrorKind
from app.library.download.gguf_extent import GgufExtent
from app.library.download.part import PartFile
from app.library.download.transport import Answer, TransientFailure, describe


@dataclass(frozen=True)
class Limit:
    """Where the part must end: the size stated (by size_source), or a cap when none was.

    by_disk says the cap is the room the disk has left, not the cap for unstated sizes;
    by_header that the file's own GGUF header set it.
    """

    size: int
    stated: bool
    size_source: str = "the server"
    by_disk: bool = False
    by_header: bool = False


@dataclass(frozen=True)
class HeaderRule:
    """A .gguf file is read as it arrives: its header (extent) bounds it, and bytes that
    are no GGUF model arrive only while the file is at most unreadable_limit, so that the
    model check can say what they are."""

    extent: GgufExtent
    unreadable_limit: int


@dataclass(frozen=True)
class StallRule:
    """No byte for seconds, or fewer than min_bytes over seconds, is a stall."""

    seconds: float
    min_bytes: int


def receive(answer: Answer, part: PartFile, out: BinaryIO, limit: Limit, stall: StallRule,
            chunk_size: int, control: DownloadControl, arrived: Callable[[int], None],
            header: HeaderRule | None = None) -> None:
    """Append the body to the part until it ends or the part reaches the limit.

    TransientFailure when the body stalls or ends before what its headers announced;
    DownloadError when the server sends past the limit, or past where the file's header
    (header, fed what the part holds already) says it ends, or sends what is no GGUF
    model (the part is deleted, or kept when the disk is what ran out).
    """
    answer.body_timeout(stall.seconds)
    response = answer.response
    announced, stated = response.length, limit
    window_start, window_bytes = time.monotonic(), 0
    if header is not None:
        limit = _within_header(header, part, part.length, limit)
    while part.length < limit.size:
        control.checkpoint()
        block = _read(response, min(chunk_size, limit.size - part.length), stall)
        if not block:
            break
        if header is not None:  # looked at before it is written: not one byte past the end lands
            header.extent.feed(block)
            limit = _within_header(header, part, part.length + len(block), limit)
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
        if _more_follows(response, limit.by_header):
            _past_the_limit(part, limit)
        if not limit.by_header or not response.length:
            return
    if announced is not None and response.length:  # the header's end, not the size the server said
        total = stated.size if stated.stated else part.length + response.length
        raise TransientFailure(f"it ended {part.name} at {human_size(part.length)} of the "
                               f"{human_size(total)} it stated", server_fault=True)


def _read(response: http.client.HTTPResponse, count: int, stall: StallRule) -> bytes:
    try:
        return response.read1(count)
    except TimeoutError:
        raise TransientFailure(f"nothing arrived for {stall.seconds:g} s") from None
    except (OSError, http.client.HTTPException) as exc:
        raise TransientFailure(describe(exc)) from None


def _more_follows(response: http.client.HTTPResponse, arrived_only: bool) -> bool:
    """Whether the body goes on past what was wanted: announced, or one more byte arrives.
    arrived_only: only a byte counts (a server that states more than the file's header
    says, then ends there, did not send more: its body ended short of what it stated)."""
    if response.length is not None and not arrived_only:
        return response.length > 0
    try:
        return bool(response.read1(1))
    except (OSError, http.client.HTTPException):  # silence or a hang-up at the end: the end
        return False


def _within_header(header: HeaderRule, part: PartFile, length: int, limit: Limit) -> Limit:
    """The limit once the header has said where the file ends; the part goes, and the
    download fails in words, when length runs past that end, or past what may arrive of
    bytes that are no GGUF model."""
    extent = header.extent
    if extent.problem is not None:
        small = header.unreadable_limit
        if length > small or (limit.stated and limit.size > small):
            part.discard()
            raise DownloadError(DownloadErrorKind.DAMAGED,
                                f"{part.name} is not a model file Kestrel can use: {extent.problem}. The "
                                f"download was stopped after {human_size(length)}, and what arrived was "
                                f"deleted. Check that the address leads to the model's .gguf file itself.")
        return limit
    if extent.end is None or extent.end >= limit.size:
        return limit
    if length > extent.end:
        _past_the_header(part, extent.end)
    return Limit(extent.end, True, "its header", by_header=True)


def _past_the_header(part: PartFile, end: int) -> NoReturn:
    part.discard()
    raise DownloadError(DownloadErrorKind.DAMAGED,
                        f"The server sent more than the model file holds: the header of {part.name} "
                        f"says the file ends after {human_size(end)}, and the server kept sending past "
                        f"that. What arrived was deleted. The address does not give out a sound model "
                        f"file: check it, or get the model from another source.")


def _past_the_limit(part: PartFile, limit: Limit) -> None:
    if limit.by_header:
        _past_the_header(part, limit.size)
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
