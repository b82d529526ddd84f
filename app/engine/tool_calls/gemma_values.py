"""Gemma's tool-call argument notation (FunctionGemma, Gemma 4): bare keys, strings between quote tokens, JSON scalars."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

_SCALAR = re.compile(r"[^,}\]]+")  # a number, true, false or null
_BARE_KEY = re.compile(r"[^:,{}\[\]\s]+")
_JSON = json.JSONDecoder()


def skip_space(text: str, at: int) -> int:
    """Where the text goes on after the white space at `at` (the families' readers use it too)."""
    return len(text) - len(text[at:].lstrip())


class GemmaValues:
    """Reads Gemma's argument notation: bare keys, strings between quote tokens, JSON scalars."""

    def __init__(self, text: str, quote: str) -> None:
        self.text, self.quote, self.at = text, quote, 0

    def read_all(self) -> Any:
        value = self.value()
        if self.text[self.at:].strip():
            raise ValueError("text after the arguments")
        return value

    def value(self) -> Any:
        self.skip_space()
        if (string := self.string()) is not None:
            return string
        if self.text.startswith("{", self.at):
            return self.sequence("}", self.member, dict)
        if self.text.startswith("[", self.at):
            return self.sequence("]", self.value, list)
        match = _SCALAR.match(self.text, self.at)
        if match is None:
            raise ValueError("a value is missing")
        self.at = match.end()
        return json.loads(match.group().strip())

    def string(self) -> str | None:
        """A string between quote tokens, or in JSON's quotes (templates that write earlier calls'
        arguments with tojson); None if no string starts here."""
        if self.text.startswith('"', self.at):
            value, self.at = _JSON.raw_decode(self.text, self.at)
            return str(value)
        if not self.text.startswith(self.quote, self.at):
            return None
        start = self.at + len(self.quote)
        end = self.text.find(self.quote, start)
        if end < 0:
            raise ValueError("a string does not end")
        self.at = end + len(self.quote)
        return self.text[start:end]

    def member(self) -> tuple[str, Any]:
        self.skip_space()
        key = self.string()
        if key is None:
            match = _BARE_KEY.match(self.text, self.at)
            if match is None:
                raise ValueError("a key is missing")
            key, self.at = match.group(), match.end()
        self.skip_space()
        if not self.text.startswith(":", self.at):
            raise ValueError("a key has no value")
        self.at += 1
        return key, self.value()

    def sequence(self, close: str, item: Callable[[], Any], kind: Callable[[list[Any]], Any]) -> Any:
        self.at += 1
        items: list[Any] = []
        self.skip_space()
        while not self.text.startswith(close, self.at):
            if items:
                if not self.text.startswith(",", self.at):
                    raise ValueError("a comma is missing")
                self.at += 1
            items.append(item())
            self.skip_space()
            if self.at >= len(self.text):
                raise ValueError("a bracket does not close")
        self.at += 1
        return kind(items)

    def skip_space(self) -> None:
        self.at = skip_space(self.text, self.at)


# --- gpt-oss (harmony) -----------------------------------------------------------------------
