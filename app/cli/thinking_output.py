"""Where `chat` writes a reasoning model's thinking: apart from its answer, on every output.

Under --json as "thinking" lines; on a terminal dimmed, before the answer; when the
output goes to a file or a pipe, on standard error, so that the output holds the answer
alone. Not at all with --no-thinking.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

# ANSI: faint text on, and back to normal intensity.
_DIM, _UNDIM = "\x1b[2m", "\x1b[22m"


class ThinkingOutput:
    """Writes thinking deltas; end() closes the thinking when the answer starts or stops."""

    def __init__(self, out: TextIO, as_json: bool, show: bool) -> None:
        self._out = out
        self._as_json = as_json
        self._show = show
        self._open = False

    def write(self, text: str) -> None:
        if not self._show:
            return
        if self._as_json:
            write(self._out, {"type": "thinking", "text": text}, True)
        elif is_terminal(self._out):
            write(self._out, ("" if self._open else _DIM) + text, False)
        else:
            write(sys.stderr, text, False)
        self._open = True

    def end(self) -> None:
        """The thinking before an answer ends with a blank line (and normal intensity)."""
        if not self._open:
            return
        self._open = False
        if not self._as_json:
            terminal = is_terminal(self._out)
            write(self._out if terminal else sys.stderr, (_UNDIM if terminal else "") + "\n\n", False)


def is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


def write(out: TextIO, item: str | dict[str, object], as_json: bool) -> None:
    """One JSON object a line under --json, else the text as it is; flushed at once."""
    out.write(json.dumps(item) + "\n" if as_json or not isinstance(item, str) else item)
    out.flush()
