"""Sampling and length settings for one generation, with their allowed ranges."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GenerationSettings:
    """How the model samples its answer and how long it may be.

    Values are stored inside conversations and the settings file, and travel to the
    engine whole in each Generate request (context_length counts when the model loads).
    Change them with `dataclasses.replace` and check them with `validated()` before use.
    """

    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    # Drops the tokens less likely than this share of the likeliest one's chance; 0 is off.
    # Some model authors recommend it (the catalog's sampling), llama.cpp follows it, and
    # ONNX Runtime GenAI has no such option, so the engine refuses it there in words.
    min_p: float = 0.0
    repeat_penalty: float = 1.1
    max_tokens: int = 512
    # -1 asks the engine for a fresh random seed on every generation.
    seed: int = -1
    context_length: int = 4096
    # Reasoning models whose template has the switch (`enable_thinking`, e.g. Qwen3)
    # think before answering when True; other models ignore it.
    thinking: bool = True
    # The MCP servers (their names in mcp.json) whose tools the model is offered in this
    # chat; none: no tools. Each call still waits for the user's approval.
    tools: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict that `json.dumps` can write."""
        data = dataclasses.asdict(self)
        data["tools"] = list(self.tools)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GenerationSettings:
        """Build settings from a dict read from disk.

        Unknown keys are dropped and missing keys take their defaults, so files written
        by older and newer versions of Kestrel both load. Values are not checked here:
        call `validated()`.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        known = {key: value for key, value in data.items() if key in names}
        if isinstance(known.get("tools"), list):  # JSON has lists; a chat's settings are frozen
            known["tools"] = tuple(known["tools"])
        return cls(**known)

    def validated(self) -> GenerationSettings:
        """These settings with numbers normalised, or ValueError naming the bad field."""
        _check_float("temperature", self.temperature, low=0.0, high=5.0)
        _check_float("top_p", self.top_p, low=0.0, high=1.0, low_open=True)
        _check_int("top_k", self.top_k, low=0)
        _check_float("min_p", self.min_p, low=0.0, high=1.0)
        _check_float("repeat_penalty", self.repeat_penalty, low=0.5, high=3.0)
        _check_int("max_tokens", self.max_tokens, low=1)
        _check_int("seed", self.seed)
        _check_int("context_length", self.context_length, low=256, high=1_048_576)
        if not isinstance(self.thinking, bool):
            raise ValueError(f"thinking must be true or false (got {self.thinking!r}).")
        tools = self.tools
        if (not isinstance(tools, tuple) or len(tools) > 100
                or not all(isinstance(name, str) and 0 < len(name) <= 200 for name in tools)):
            raise ValueError(f"tools must be a list of MCP server names (got {tools!r}).")
        return dataclasses.replace(
            self,
            temperature=float(self.temperature),
            top_p=float(self.top_p),
            min_p=float(self.min_p),
            repeat_penalty=float(self.repeat_penalty),
        )


def _check_float(
    name: str,
    value: object,
    *,
    low: float,
    high: float,
    low_open: bool = False,
) -> None:
    lower = f"greater than {low:g}" if low_open else f"from {low:g}"
    allowed = f"{name} must be a number {lower} {'and at most' if low_open else 'to'} {high:g}"
    # bool is an int subclass, but True as a temperature is a mistake, not 1.0.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{allowed} (got {value!r}).")
    too_low = value <= low if low_open else value < low
    if not math.isfinite(value) or too_low or value > high:
        raise ValueError(f"{allowed} (got {value!r}).")


def _check_int(
    name: str,
    value: object,
    *,
    low: int | None = None,
    high: int | None = None,
) -> None:
    if low is not None and high is not None:
        allowed = f"{name} must be a whole number from {low:,} to {high:,}"
    elif low is not None:
        allowed = f"{name} must be a whole number of {low} or more"
    else:
        allowed = f"{name} must be a whole number"
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{allowed} (got {value!r}).")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{allowed} (got {value!r}).")
