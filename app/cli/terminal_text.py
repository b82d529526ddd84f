"""Text from chats and files shown on a terminal as text: its control characters escaped."""

from __future__ import annotations

import re

# C0 and C1 controls (ESC starts colour, title and clipboard sequences; 0x9b is a one-byte
# CSI to some terminals), DEL, and the bidirectional overrides and isolates that can make
# text read other than it is. Tab and newline are kept where lines are kept.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
_IN_TEXT = re.compile(f"[{_CONTROLS}]")
_IN_LINE = re.compile(f"[\t\n{_CONTROLS}]")


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(text: str) -> str:
    """text with every control character but tab and newline written as \\xNN or \\uNNNN;
    a Windows line end (CR LF) is a newline."""
    return _IN_TEXT.sub(_escaped, text.replace("\r\n", "\n"))


def terminal_line(text: str) -> str:
    """text for one line of a listing: tabs and newlines escaped too."""
    return _IN_LINE.sub(_escaped, text)


# A path longer than this is shown by its two ends: thousands of characters (a folder
# 100 levels down) would fill the terminal and hide what the message says.
PATH_SHOWN = 200


def shown_path(path: object) -> str:
    """A path for one line of output: as terminal_line shows it, and if long, its start
    and its end around "…"."""
    text = terminal_line(str(path))
    if len(text) <= PATH_SHOWN:
        return text
    end = PATH_SHOWN // 2
    return f"{text[:end]}…{text[-end:]}"


def disk_failure(exc: OSError, verb: str, otherwise: str) -> str:
    """What a command says when the disk refused it: which file (or `otherwise`) and what to check."""
    where = shown_path(exc.filename) if exc.filename else otherwise
    return (f"Kestrel could not {verb} {where}: {exc.strerror or exc}. Check that the disk is there and has "
            "space and that you may write to it, then try again.")
