"""The note Kestrel appends to a tool result it cut, so the model (and the user reading the call) knows.

No MCP SDK import here: the service and the front ends use it without loading the SDK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class CutReason(Enum):
    CONTEXT = "to fit the model's context"
    SETTING = "(the longest tool result the settings allow)"


@dataclass(frozen=True)
class ResultCut:
    """What a cut result's note says: characters kept, characters the tool gave, and why."""

    kept: int
    total: int
    reason: CutReason


_NOTE = re.compile(r"\n\[Kestrel cut this tool result to ([\d,]+) of ([\d,]+) characters (.+)\.\]\Z")
_REASONS = {reason.value: reason for reason in CutReason}


def cut_note(kept: int, total: int, reason: CutReason) -> str:
    return f"\n[Kestrel cut this tool result to {kept:,} of {total:,} characters {reason.value}.]"


def cut_result(text: str, keep: int, reason: CutReason) -> str:
    """The first `keep` characters of text and the note saying how many there were."""
    keep = max(0, min(keep, len(text)))
    return text[:keep] + cut_note(keep, len(text), reason)


def cut_of(text: str) -> ResultCut | None:
    """What the note of a result Kestrel cut says (for a front end to show that it was cut); None for
    a result it did not cut."""
    found = _NOTE.search(text)
    if found is None or found.group(3) not in _REASONS:
        return None
    return ResultCut(int(found.group(1).replace(",", "")), int(found.group(2).replace(",", "")),
                     _REASONS[found.group(3)])
