"""A reasoning model's thinking, told apart from its answer as the text streams.

Reasoning models (Qwen3, QwQ, DeepSeek-R1 and its distills, Phi-4-reasoning, …) write
their thoughts between two markers before the answer: `<think>…</think>` for most of
them. Which markers a model uses is read from its chat template (the template writes
them into earlier turns, or opens the thinking block in the generation prompt). Some
templates open the block themselves (DeepSeek-R1 ends its prompt with `<think>\\n`), so
the answer starts inside it and only the closing marker ever arrives.

gpt-oss writes its thinking another way: as harmony messages on the analysis channel
(`<|channel|>analysis<|message|>…`), its answer on the final channel; app/engine/answers/harmony.py
tells those apart. Which way a model writes is one value, its ThinkingStyle, read from
the template (thinking_in); splitter_for gives the splitter that reads it.

The markers and headers themselves are never shown or stored: the splitter gives thinking
and answer text apart, and the history keeps them in separate fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from app.engine.answers.harmony import HarmonyChannels, HarmonySplitter, message_stops, writes_harmony


@dataclass(frozen=True)
class ThinkingMarkers:
    """The text that opens and the text that closes a model's thinking."""

    open: str
    close: str


# Marker pairs of current reasoning models; a template that writes the closing one uses the pair.
KNOWN_MARKERS = (
    ThinkingMarkers("<think>", "</think>"),  # Qwen3, QwQ, DeepSeek-R1, Phi-4-reasoning, SmolLM3, GLM
    ThinkingMarkers("<seed:think>", "</seed:think>"),  # Seed-OSS
    ThinkingMarkers("[THINK]", "[/THINK]"),  # Magistral
    ThinkingMarkers("<|START_THINKING|>", "<|END_THINKING|>"),  # Command A Reasoning
)


# How a model writes its thinking: between two markers, or on a harmony channel (gpt-oss).
ThinkingStyle = ThinkingMarkers | HarmonyChannels


class Splitter(Protocol):
    """Tells a model's thinking from its answer as the text streams."""

    thought: bool  # some thinking text arrived

    def feed(self, text: str) -> list[tuple[bool, str]]:
        """The parts of text that can be shown now: (True, thinking) or (False, answer)."""

    def finish(self) -> list[tuple[bool, str]]:
        """The end of the answer: what was held back."""


def thinking_in(template: str | None) -> ThinkingStyle | None:
    """How a chat template's model writes its thinking, or None for a model that does not think."""
    if writes_harmony(template):
        return HarmonyChannels()
    return markers_in(template)


def splitter_for(style: ThinkingStyle, prompt: str) -> Splitter:
    """The splitter for a model's answer to prompt (which may leave the thinking open)."""
    if isinstance(style, HarmonyChannels):
        return HarmonySplitter(style, prompt=prompt)
    return ThinkingSplitter(style, inside=opens_thinking(prompt, style))


def answer_stops(style: ThinkingStyle | None, stops: tuple[str, ...]) -> tuple[str, ...]:
    """The template's stop strings that end an answer written this way: a harmony answer's
    message ends (`<|end|>`) are not its end."""
    return message_stops(stops) if isinstance(style, HarmonyChannels) else stops


def markers_in(template: str | None) -> ThinkingMarkers | None:
    """The thinking markers a chat template uses, or None for a model that does not think."""
    if not template:
        return None
    for markers in KNOWN_MARKERS:
        if markers.close in template:
            return markers
    return None


def has_switch(template: str | None) -> bool:
    """Whether the template turns thinking on and off (`enable_thinking`, as Qwen3's)."""
    return template is not None and "enable_thinking" in template


def template_variables(thinking: bool) -> dict[str, bool]:
    """What a template is told of GenerationSettings.thinking: nothing when on (each
    template's own default, as transformers renders it), enable_thinking=False when off."""
    return {} if thinking else {"enable_thinking": False}


def opens_thinking(prompt: str, markers: ThinkingMarkers) -> bool:
    """True if the prompt leaves a thinking block open: the answer starts inside it."""
    opened = prompt.rfind(markers.open)
    return opened >= 0 and prompt.find(markers.close, opened) < 0


class ThinkingSplitter:
    """Splits streamed text into (thinking, text) parts, dropping the markers.

    A marker can arrive split over several tokens, so text that could be the start of
    one is held back until it resolves. Whitespace right after a marker, and at the end
    of the thinking, is not part of either.
    """

    def __init__(self, markers: ThinkingMarkers, *, inside: bool = False) -> None:
        self.markers = markers
        self.thinking = inside
        self.thought = False  # some thinking text arrived
        self.closed = False  # the thinking block ended
        self._pending = ""
        self._section_started = False
        self._trailing_space = ""

    def feed(self, text: str) -> list[tuple[bool, str]]:
        """The parts of text that can be shown now: (True, thinking) or (False, answer)."""
        self._pending += text
        parts: list[tuple[bool, str]] = []
        while True:
            marker = self.markers.close if self.thinking else self.markers.open
            if self.closed and not self.thinking:
                marker = ""  # One thinking block per answer: later markers are answer text.
            found = self._pending.find(marker) if marker else -1
            if found < 0:
                hold = _held_prefix(self._pending, marker) if marker else 0
                ready, self._pending = self._pending[:len(self._pending) - hold], self._pending[len(self._pending) - hold:]
                self._add(parts, ready)
                return parts
            self._add(parts, self._pending[:found])
            self._pending = self._pending[found + len(marker):]
            self._switch()

    def finish(self) -> list[tuple[bool, str]]:
        """The end of the answer: what was held back."""
        parts: list[tuple[bool, str]] = []
        self._add(parts, self._pending)
        self._pending = ""
        return parts

    def _switch(self) -> None:
        if self.thinking:
            self.closed = True
        self.thinking = not self.thinking
        self._section_started = False
        self._trailing_space = ""

    def _add(self, parts: list[tuple[bool, str]], text: str) -> None:
        if not self._section_started:
            text = text.lstrip()
            if not text:
                return
            self._section_started = True
        if self.thinking:
            # Whitespace before the closing marker is held: it shows only if more follows.
            text = self._trailing_space + text
            body = text.rstrip()
            self._trailing_space = text[len(body):]
            text = body
            if text:
                self.thought = True
        if text:
            if parts and parts[-1][0] == self.thinking:
                parts[-1] = (self.thinking, parts[-1][1] + text)
            else:
                parts.append((self.thinking, text))


def _held_prefix(text: str, marker: str) -> int:
    """How much of the end of text could be the start of marker."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:size]):
            return size
    return 0
