"""A tool call an API answer repeats after the client already sent its result: answered in words from that result."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from app.core.answer_stats import AnswerStats, FinishReason
from app.core.conversation import Role
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done, ToolCall

# Through the API the client runs the tools. After it sent get_weather's result, Qwen2.5-Coder
# 0.5B and 1.5B answered with the same call again (same tool, same arguments), every time, with
# or without a system prompt: a client would run it again, perhaps for ever. The result is in
# the request, so the answer is asked for once more without tools (tool_choice "none": the
# template gets none, so the model cannot call one) and with these words after that result.
NOTE = ("\n\n[Kestrel: this is the result of {name} {arguments}, already called. Answer the user's "
        "question from it, in words; do not call a tool again.]")

Key = tuple[str, str]


def answered_calls(messages: Sequence[ChatMessage]) -> dict[Key, int]:
    """The calls made since the user's last turn whose results the client sent back, each with
    the index of its (last) result. A call from an earlier question is not counted: asking again
    may be asking for news (the weather an hour later)."""
    last_user = max((i for i, message in enumerate(messages) if message.role is Role.USER), default=-1)
    made: dict[str, Key] = {}
    answered: dict[Key, int] = {}
    for index in range(last_user + 1, len(messages)):
        message = messages[index]
        if message.role is Role.ASSISTANT:
            made.update((call.id, call.key()) for call in message.tool_calls)
        elif message.role is Role.TOOL and message.tool_call_id in made:
            answered[made[message.tool_call_id]] = index
    return answered


def asked_again(messages: Sequence[ChatMessage], result_at: int, call: ToolCall) -> tuple[ChatMessage, ...]:
    """The messages for the second try: the repeated call's result followed by the note."""
    note = NOTE.format(name=call.name, arguments=call.key()[1])
    held = messages[result_at]
    return (*messages[:result_at], dataclasses.replace(held, content=held.content + note), *messages[result_at + 1:])


def without_calls(shape: AnswerShape) -> AnswerShape:
    """The same answer shape with no tools given this turn (the engine's tool_choice "none")."""
    return dataclasses.replace(shape, tool_choice="none")


class RepeatWatch:
    """Watches one answer's events: drops each call identical to one already answered in the
    request, numbers the calls that pass from 0 again, and says at the end whether the answer
    must be asked for again (only repeats, no words, no new call)."""

    def __init__(self, messages: Sequence[ChatMessage], shape: AnswerShape) -> None:
        # Only when the model chooses ("auto"): a client that asked for a call ("required", a
        # tool's name) gets the call it asked for.
        self._answered = answered_calls(messages) if shape.uses_tools and shape.tool_choice == "auto" else {}
        self.repeated: ToolCall | None = None  # the first call dropped
        self._passed = 0
        self._words = False

    def passes(self, event: Delta) -> Delta | None:
        """The event to send on (a passing call renumbered), or None for a repeat."""
        call = event.tool_call
        if call is None:
            self._words = self._words or (bool(event.text.strip()) and not event.thinking)
            return event
        if call.key() in self._answered:
            self.repeated = self.repeated or call
            return None
        self._passed += 1
        return event if call.index == self._passed - 1 else \
            dataclasses.replace(event, tool_call=dataclasses.replace(call, index=self._passed - 1))

    def ask_again(self, done: Done) -> int | None:
        """The index of the result to answer from, when the answer was only repeats of answered
        calls (no words, no new call) and ended on its own; None: send the answer as it is."""
        if self.repeated is None or self._passed or self._words or done.stats.error:
            return None
        if done.finish_reason not in (FinishReason.STOP, FinishReason.LENGTH):
            return None
        return self._answered[self.repeated.key()]


class CopyHold:
    """The second try's words, held back while they may be a call written as text: with no tools
    the model's calls are not read, and a model that copies its call (`{{"name": "get_time", ...}}`,
    `<tool_call>...`) would hand the client that as its answer. Words that open like a call
    (`{`, `<`, `[`, a fence) wait for the end and are dropped if they name a tool; others stream."""

    def __init__(self, shape: AnswerShape) -> None:
        self._names = tool_names(shape.tools)
        self._held: list[Delta] = []
        self._holding: bool | None = None  # None: no word yet to tell by

    def passes(self, event: Delta) -> list[Delta]:
        """The events to send now (none while held)."""
        if event.thinking or event.tool_call is not None or self._holding is False:
            return [event] if event.tool_call is None else []
        self._held.append(event)
        if self._holding is None:
            start = "".join(held.text for held in self._held).lstrip()
            if not start:
                return []
            self._holding = start[0] in "{<[`"
            if not self._holding:
                sent, self._held = self._held, []
                return sent
        return []

    def rest(self) -> list[Delta]:
        """At the end: what was held, unless it is a call copied as text."""
        text = "".join(held.text for held in self._held)
        return [] if self._holding and any(name in text for name in self._names) else self._held


def tool_names(tools: str | None) -> tuple[str, ...]:
    """The names of the tools in the shape's JSON (the engine checked it on the first try)."""
    try:
        listed = json.loads(tools or "[]")
        return tuple(str(tool["function"]["name"]) for tool in listed)
    except (ValueError, TypeError, KeyError):
        return ()


def both(first: AnswerStats, second: AnswerStats) -> AnswerStats:
    """The second try's report, counting the tokens and time of both tries."""
    return dataclasses.replace(second, tokens=first.tokens + second.tokens, total_ms=first.total_ms + second.total_ms)
