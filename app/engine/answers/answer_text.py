"""Turns the bytes of generated tokens into text that is safe to show as it streams."""

from __future__ import annotations

import codecs
from typing import Iterable


class AnswerText:
    """Holds back what must not be shown yet.

    A token can end in the middle of a UTF-8 character (emoji and CJK often span two or
    three tokens), and the start of a stop string must not flash on screen before the
    rest of it arrives. Both are held until they resolve.
    """

    def __init__(self, stops: Iterable[str] = (), *, strip_start: bool = True) -> None:
        # strip_start: a chat answer drops the whitespace its turn marker leaves; a raw
        # completion keeps it (" Paris" goes on "The capital of France is").
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stops = tuple(s for s in stops if s)
        self._pending = ""
        self._started = not strip_start
        self.stopped_by: str | None = None
        self.text = ""

    def feed(self, data: bytes) -> str:
        """Add a token's bytes; returns the text that can be shown now."""
        if self.stopped_by is not None:
            return ""
        chunk = self._decoder.decode(data)
        if not self._started:
            # An answer never opens with the whitespace left over from the turn marker.
            chunk = chunk.lstrip()
            if not chunk:
                return ""
            self._started = True
        self._pending += chunk
        return self._emit(self._release())

    def finish(self) -> str:
        """The end of the answer: release what was held (a cut-off character is dropped)."""
        if self.stopped_by is not None:
            return ""
        self._decoder.reset()
        out, self._pending = self._pending, ""
        return self._emit(out)

    def _emit(self, out: str) -> str:
        self.text += out
        return out

    def _release(self) -> str:
        hit = self._first_stop()
        if hit is not None:
            index, stop = hit
            out = self._pending[:index]
            self._pending = ""
            self.stopped_by = stop
            return out
        hold = self._held_suffix_length()
        cut = len(self._pending) - hold
        out, self._pending = self._pending[:cut], self._pending[cut:]
        return out

    def _first_stop(self) -> tuple[int, str] | None:
        found = [(self._pending.find(s), s) for s in self._stops]
        found = [(i, s) for i, s in found if i >= 0]
        return min(found) if found else None

    def _held_suffix_length(self) -> int:
        longest = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(self._pending)), longest, -1):
                if self._pending.endswith(stop[:size]):
                    longest = size
                    break
        return longest
