"""How one answer went: its speed, its tokens, where it ran and why it ended."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class FinishReason(StrEnum):
    """Why an answer ended.

    The values are written to the history, to chat exports and to `kestrel chat --json`:
    add members, but never rename or reuse a value.
    """

    STOP = "stop"  # the model ended it, or one of its stop strings came
    LENGTH = "length"  # it reached the answer's token limit (max_tokens)
    CONTEXT = "context"  # the context filled up before that limit
    CANCELLED = "cancelled"  # the user stopped it, or it left the engine's line unstarted


_REASONS = {reason.value: reason for reason in FinishReason}


@dataclass(frozen=True)
class AnswerStats:
    """The engine's report on one answer, kept with the message in the history.

    ttft_ms is the time to the first token; tokens_per_s the decoding speed after it.
    prompt_tokens_evaluated is the part of the prompt not reused from the KV cache.
    device is where the answer ran, in the words of the loaded model's device.
    finish_reason: why it ended. chat_format: embedded or the built-in format used.
    messages_left_out: the oldest turns dropped to fit the context.
    template_note: why the model's own chat template was not used, when it was not.
    thinking_ms: how long a reasoning model thought before its answer (0: it did not).
    threads: the CPU threads that decoded it.
    server: the name of the server the person added that wrote it ("" : this computer did).
    error: set by the service, never by the engine, when the engine failed mid-answer:
    its words. The engine then reported nothing, so the other fields are not known and
    only this one is stored (as Kestrel has always stored such an answer).
    """

    ttft_ms: float = 0.0
    tokens: int = 0
    tokens_per_s: float = 0.0
    prompt_tokens: int = 0
    prompt_tokens_evaluated: int = 0
    device: str = ""
    finish_reason: FinishReason = FinishReason.STOP
    chat_format: str = ""
    total_ms: float = 0.0
    messages_left_out: int = 0
    template_note: str = ""
    thinking_ms: float = 0.0
    threads: int = 0
    server: str = ""
    error: str = ""

    def __post_init__(self) -> None:
        # A reason given as its word (as callers did before the enum) is stored as the
        # enum, so that `is` compares and to_dict writes it; a word it lacks is a bug.
        if not isinstance(self.finish_reason, FinishReason):
            object.__setattr__(self, "finish_reason", FinishReason(self.finish_reason))

    @property
    def reported(self) -> bool:
        """True if the engine reported on the answer (False: it failed, see `error`)."""
        return not self.error

    def to_dict(self) -> dict[str, Any]:
        """The stats as a plain dict that `json.dumps` can write: the form the history,
        chat exports and `kestrel chat --json` have always had."""
        if self.error:
            return {"error": self.error}
        data = dataclasses.asdict(self)
        del data["error"]
        if not self.server:
            del data["server"]  # an answer written here is stored exactly as before servers existed
        data["finish_reason"] = self.finish_reason.value
        return data

    def to_json(self) -> str:
        """The stats as the history stores them."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnswerStats:
        """Stats read back from the history or from a chat export.

        Unknown keys are dropped, and missing ones (or ones whose value is not of the
        field's type, null included) take their defaults, so rows written by older and
        newer versions of Kestrel, and hand-edited exports, all load. A finish reason
        this version does not know reads as stop.
        """
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            if field.name in data:
                value = _typed(field.default, data[field.name])
                if value is not None:
                    values[field.name] = value
        return cls(**values)

    @classmethod
    def from_json(cls, stored: object) -> AnswerStats | None:
        """Stats from the history's column: None where there are none, or where what is
        stored is not a JSON object (a row another program wrote)."""
        if not isinstance(stored, str):
            return None
        try:
            data = json.loads(stored)
        except (ValueError, RecursionError):
            return None
        return cls.from_dict(data) if isinstance(data, dict) else None


def _typed(default: object, value: object) -> object | None:
    """`value` as the type of a field whose default is `default`, or None if it is not one."""
    if isinstance(value, bool):
        return None  # JSON's true and false are no number of this record
    if isinstance(default, FinishReason):
        return _REASONS.get(value) if isinstance(value, str) else None
    if isinstance(default, float):
        if not isinstance(value, (int, float)):
            return None
        try:
            return float(value)
        except OverflowError:  # an integer of hundreds of digits, from a hand-made file
            return None
    if isinstance(default, int):
        return value if isinstance(value, int) else None
    return value if isinstance(value, str) else None
