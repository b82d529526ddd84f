"""gpt-oss's answer told apart by channel: its thinking (analysis) from its answer (final).

gpt-oss writes every message of its answer in OpenAI's harmony format: a header that
names the channel, then the message, then an end token:

    <|channel|>analysis<|message|>User asks…<|end|><|start|>assistant<|channel|>final<|message|>Hello!

The vendored llama.cpp prints `<|start|>`, `<|channel|>`, `<|message|>` and `<|constrain|>`
as text (it makes them user-defined tokens "for gpt-oss"); `<|return|>` and `<|call|>` end
the answer (end-of-generation tokens, never printed), and `<|end|>`, taken off the
end-of-generation list because those two are there, is made user-defined too: it prints.
So `<|end|>` ends one message, not the answer: it is no stop string (message_stops), and
the splitter drops it (and `<|return|>`, should another detokenizer print that).

The splitter drops the headers, gives the analysis channel as thinking and every other
channel (final, a commentary preamble) as answer. A message to a recipient (`to=functions.NAME`,
a tool call) passes through raw, header included, as answer text: the tool-call reader
(app/engine/tool_calls/tool_call_families.py `_read_harmony`) reads it after the splitter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPENERS = ("<|start|>", "<|channel|>")
_MESSAGE = "<|message|>"
_ENDS = ("<|end|>", "<|return|>")
_CALL = "<|call|>"
_MARKERS = _OPENERS + _ENDS + (_CALL,)
# A header is a few tokens ("<|start|>assistant to=functions.x<|channel|>commentary json");
# an "opener" followed by this much text without a `<|message|>` is answer text.
HEADER_LIMIT = 300
_CHANNEL = re.compile(r"<\|channel\|>\s*([A-Za-z_]+)")
_THINKING, _ANSWER, _RAW = "thinking", "answer", "raw"


@dataclass(frozen=True)
class HarmonyChannels:
    """How a harmony model (gpt-oss) writes its thinking: as messages on a channel."""

    thinking_channel: str = "analysis"


def message_stops(stops: tuple[str, ...]) -> tuple[str, ...]:
    """The stop strings of a harmony answer: the template's turn marker `<|end|>` ends one of
    its messages (the thinking), so the answer does not stop on it."""
    return tuple(stop for stop in stops if stop not in _ENDS)


def writes_harmony(template: str | None) -> bool:
    """Whether a chat template writes harmony channels with an analysis channel (gpt-oss's)."""
    return template is not None and "<|channel|>analysis" in template


class HarmonySplitter:
    """Splits streamed harmony text into (thinking, text) parts, dropping the headers.

    A header can arrive split over several tokens, so text from an opener on is held back
    until its `<|message|>` arrives (or it has grown too long to be a header). Whitespace
    at the start of a message, and at the end of the thinking, is not part of either.
    """

    def __init__(self, channels: HarmonyChannels = HarmonyChannels(), *, prompt: str = "") -> None:
        self.channels = channels
        self.thought = False  # some thinking text arrived
        self._pending = ""
        self._mode = self._mode_of(_open_header(prompt)) if prompt else _ANSWER
        self._section_started = False
        self._trailing_space = ""
        self._gave = {_THINKING: False, _ANSWER: False}

    def feed(self, text: str) -> list[tuple[bool, str]]:
        """The parts of text that can be shown now: (True, thinking) or (False, answer)."""
        self._pending += text
        parts: list[tuple[bool, str]] = []
        while self._step(parts):
            pass
        return parts

    def finish(self) -> list[tuple[bool, str]]:
        """The end of the answer: what was held back. A header cut off before its
        `<|message|>` is dropped, unless it names a recipient (a cut-off call the reader reports)."""
        parts: list[tuple[bool, str]] = []
        held, self._pending = self._pending, ""
        if held.startswith(_OPENERS) and "to=" not in held:
            return parts
        if held.startswith(_OPENERS):
            self._mode = _RAW
        self._add(parts, held)
        return parts

    def _step(self, parts: list[tuple[bool, str]]) -> bool:
        """Handle the next marker in the pending text; False when more text is needed."""
        found = _first_marker(self._pending)
        if found is None:
            hold = _held_prefix(self._pending)
            self._add(parts, self._pending[:len(self._pending) - hold])
            self._pending = self._pending[len(self._pending) - hold:]
            return False
        at, marker = found
        self._add(parts, self._pending[:at])
        self._pending = self._pending[at:]
        if marker in _OPENERS:
            return self._header(parts)
        self._pending = self._pending[len(marker):]
        if marker == _CALL and self._mode == _RAW:
            self._add(parts, marker)  # the reader ends the call on it
        self._start(_ANSWER)  # text after a message's end and before a header is answer
        return True

    def _header(self, parts: list[tuple[bool, str]]) -> bool:
        """The pending text starts with an opener: read the header once it is whole."""
        end = self._pending.find(_MESSAGE, 0, HEADER_LIMIT)
        if end < 0:
            if len(self._pending) < HEADER_LIMIT:
                return False
            opener = next(o for o in _OPENERS if self._pending.startswith(o))
            self._add(parts, opener)  # too long for a header: the opener is text
            self._pending = self._pending[len(opener):]
            return True
        header = self._pending[:end + len(_MESSAGE)]
        self._pending = self._pending[len(header):]
        self._start(self._mode_of(header))
        if self._mode == _RAW:
            self._add(parts, header)
        return True

    def _mode_of(self, header: str | None) -> str:
        if header is None:
            return _ANSWER
        if "to=" in header:
            return _RAW
        channel = _CHANNEL.search(header)
        return _THINKING if channel and channel.group(1) == self.channels.thinking_channel else _ANSWER

    def _start(self, mode: str) -> None:
        self._mode = mode
        self._section_started = False
        self._trailing_space = ""

    def _add(self, parts: list[tuple[bool, str]], text: str) -> None:
        mode = self._mode
        if mode != _RAW and not self._section_started:
            text = text.lstrip()
            if not text:
                return
            self._section_started = True
            if self._gave[mode]:
                text = "\n\n" + text  # a second message on the same side: a new paragraph
        if mode == _THINKING:
            # Whitespace at the end of a thinking message is held: it shows only if more follows.
            text = self._trailing_space + text
            body = text.rstrip()
            self._trailing_space = text[len(body):]
            text = body
        if not text:
            return
        thinking = mode == _THINKING
        self.thought = self.thought or thinking
        self._gave[_THINKING if thinking else _ANSWER] = True
        if parts and parts[-1][0] == thinking:
            parts[-1] = (thinking, parts[-1][1] + text)
        else:
            parts.append((thinking, text))


def _first_marker(text: str) -> tuple[int, str] | None:
    found = [(text.find(marker), marker) for marker in _MARKERS]
    hits = [(at, marker) for at, marker in found if at >= 0]
    return min(hits) if hits else None


def _held_prefix(text: str) -> int:
    """How much of the end of text could be the start of a marker."""
    longest = 0
    for marker in _MARKERS:
        for size in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:size]):
                longest = size
                break
    return longest


def _open_header(prompt: str) -> str | None:
    """The header of a message the prompt leaves open (it ends right after `<|message|>`),
    so the answer starts inside it; None when the prompt opens none."""
    if not prompt.rstrip().endswith(_MESSAGE):
        return None
    end = prompt.rstrip()[:-len(_MESSAGE)]
    start = max(end.rfind(opener) for opener in _OPENERS)
    return end[start:] + _MESSAGE if start >= 0 else None
