"""How one answer went: its speed, its tokens, where it ran and why it ended."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AnswerStats:
    """The engine's report on one answer, kept with the message in the history.

    ttft_ms is the time to the first token; tokens_per_s the decoding speed after it.
    prompt_tokens_evaluated is the part of the prompt not reused from the KV cache.
    device is where the answer ran, in the words of the loaded model's device.
    finish_reason: stop, length, context or cancelled. chat_format: embedded or the
    built-in format used. messages_left_out: the oldest turns dropped to fit the context.
    template_note: why the model's own chat template was not used, when it was not.
    thinking_ms: how long a reasoning model thought before its answer (0: it did not).
    threads: the CPU threads that decoded it.
    """

    ttft_ms: float = 0.0
    tokens: int = 0
    tokens_per_s: float = 0.0
    prompt_tokens: int = 0
    prompt_tokens_evaluated: int = 0
    device: str = ""
    finish_reason: str = ""
    chat_format: str = ""
    total_ms: float = 0.0
    messages_left_out: int = 0
    template_note: str = ""
    thinking_ms: float = 0.0
    threads: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The stats as a plain dict that `json.dumps` can write."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnswerStats:
        """Stats read back from the history.

        Unknown keys are dropped, and missing or null ones take their defaults, so rows
        written by older and newer versions of Kestrel both load.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names and value is not None})
