"""Outside text stays text: control-token text in a message becomes plain text in the prompt.

A chat template writes a conversation's turns between the model's control tokens
(`<|im_start|>`, `<end_of_turn>`), and the rendered prompt used to be tokenized with every
control token's text read as that token. Text from outside (a user's or an API client's
message, an attached file, a document passage, a tool's result, a tool's schema) could
then close its own turn and open another (`<|im_end|>\\n<|im_start|>system\\n...`).

So before the template runs, each control-token text in a string from outside is put
out of its reach: a placeholder of private-use characters takes its place (the template
sees neither the marker nor anything that looks like one), and after rendering the
placeholders are put back and their places recorded (PromptSpec.plain). The backend's
tokenizer then reads those places as plain text and the rest of the prompt as before:
only the template's own markers become control tokens. A prompt without such text is
rendered and tokenized exactly as before.

llama.cpp's server, llama-cpp-python's chat handlers and transformers' apply_chat_template
all tokenize the whole rendered prompt with special tokens parsed, so they share the
flaw; this follows the fix that ollama's renderers and a llama.cpp proposal make
(segments of template markup and of content, tokenized apart).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Sequence

from app.engine.control import PromptCancelled

# Character spans, [start, end), of a prompt's text that must be read as plain text.
Spans = tuple[tuple[int, int], ...]
# Where control-token text is in a string: character spans, in order, not overlapping.
FindControl = Callable[[str], Sequence[tuple[int, int]]]

_PRIVATE_USE = range(0xE000, 0xF900)
# No real vocabulary has a special token this long; a longer one is left out of the patterns.
MAX_TOKEN_TEXT = 1024
# Items of a list escaped between two looks at the cancel flag (a chat of 200,000 messages).
_ITEMS_PER_LOOK = 1024


class Shield:
    """Escapes the control-token text of outside strings for one request's renderings, and
    puts it back afterwards; each string is searched once, however many times the prompt
    is rendered (the oldest turns left out one way and another)."""

    def __init__(self, find: FindControl, template: str | None, cancelled: Callable[[], bool] | None = None) -> None:
        self._find = find
        self._cancelled = cancelled
        # A placeholder character the template itself never writes.
        self._mark = next(chr(code) for code in _PRIVATE_USE if chr(code) not in (template or ""))
        self._texts: list[str] = []  # what each placeholder stands for
        self._numbers: dict[str, int] = {}
        self._control: set[int] = set()  # placeholders of control-token text (the others: a literal mark)
        self._escaped: dict[str, str] = {}
        self._placeholder = re.compile(f"{self._mark}(\\d+){self._mark}")

    @property
    def used(self) -> bool:
        """Whether any string so far held control-token text (or the placeholder character)."""
        return bool(self._texts)

    def escape(self, value: Any) -> Any:
        """The value with every string in it (dict keys too) escaped; other values as they are."""
        if isinstance(value, str):
            return self.escape_text(value)
        if isinstance(value, dict):
            return {self.escape(key): self.escape(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self._escape_item(index, item) for index, item in enumerate(value))
        return value

    def _escape_item(self, index: int, item: Any) -> Any:
        if self._cancelled is not None and index % _ITEMS_PER_LOOK == _ITEMS_PER_LOOK - 1 and self._cancelled():
            raise PromptCancelled()
        return self.escape(item)

    def escape_text(self, text: str) -> str:
        known = self._escaped.get(text)
        if known is not None:
            return known
        if self._mark in text:
            # The placeholder character itself is escaped too, so that every one left after
            # rendering is a placeholder's.
            escaped = self._number(self._mark, control=False).join(map(self._escape_part, text.split(self._mark)))
        else:
            escaped = self._escape_part(text)  # text itself when it holds no control-token text
        self._escaped[text] = escaped
        return escaped

    def _escape_part(self, text: str) -> str:
        spans = self._find(text) if text else ()
        if not spans:
            return text
        pieces: list[str] = []
        done = 0
        for start, end in spans:
            pieces.append(text[done:start])
            pieces.append(self._number(text[start:end], control=True))
            done = end
        pieces.append(text[done:])
        return "".join(pieces)

    def _number(self, text: str, *, control: bool) -> str:
        number = self._numbers.get(text)
        if number is None:
            number = self._numbers[text] = len(self._texts)
            self._texts.append(text)
            if control:
                self._control.add(number)
        return f"{self._mark}{number}{self._mark}"

    def restore(self, rendered: str) -> tuple[str, Spans]:
        """The rendered prompt with the escaped text back, and where its control-token text is."""
        if not self._texts or self._mark not in rendered:
            return rendered, ()
        pieces: list[str] = []
        spans: list[tuple[int, int]] = []
        length = done = 0
        for match in self._placeholder.finditer(rendered):
            number = int(match.group(1))
            if number >= len(self._texts):
                continue  # a template that cut one apart left digits that are no placeholder
            before = rendered[done:match.start()]
            pieces.append(before)
            length += len(before)
            original = self._texts[number]
            pieces.append(original)
            if number in self._control:
                spans.append((length, length + len(original)))
            length += len(original)
            done = match.end()
        pieces.append(rendered[done:])
        return "".join(pieces), tuple(spans)


class PromptPrep:
    """One request's prompt being made: its shield, the prompts rendered so far (the
    backend's tokenize is handed a prompt's text alone, as answer_common's fit_prompt
    does), and its cancel flag."""

    def __init__(self, find: FindControl, template: str | None,
                 cancelled: Callable[[], bool] | None = None) -> None:
        self.shield = Shield(find, template, cancelled)
        self.cancelled = cancelled
        self._plain: dict[str, Spans] = {}

    def keep(self, text: str, plain: Spans) -> None:
        """A prompt rendered for this request, and its plain spans."""
        if plain:
            self._plain[text] = plain

    def plain(self, text: str) -> Spans:
        """The plain spans of a prompt rendered for this request (none for any other text)."""
        return self._plain.get(text, ())


def literal_pattern(texts: Iterable[str]) -> str:
    """A regular expression that matches any of texts, the longest where several start at
    one place: a trie, so that thousands of them (Gemma's 6,414 special tokens) are searched
    at the speed of a few."""
    root: dict[str, Any] = {}
    for text in texts:
        if not text or len(text) > MAX_TOKEN_TEXT:
            continue
        node = root
        for unit in text:
            node = node.setdefault(unit, {})
        node[""] = {}  # a text ends here
    return _branches(root)


def literal_bytes_pattern(texts: Iterable[bytes]) -> bytes:
    """literal_pattern for bytes: each byte stands for itself as a Latin-1 character."""
    return literal_pattern(text.decode("latin-1") for text in texts).encode("latin-1")


def _branches(node: dict[str, Any]) -> str:
    """The pattern below a trie node; a chain of single letters is written as one literal,
    so that nesting grows only where texts part ways."""
    choices = []
    for unit, child in sorted(node.items()):
        if not unit:
            continue
        run = [unit]
        while len(child) == 1 and "" not in child:
            (next_unit, child), = child.items()
            run.append(next_unit)
        choices.append(re.escape("".join(run)) + _branches(child))
    if not choices:
        return ""
    body = choices[0] if len(choices) == 1 else "(?:" + "|".join(choices) + ")"
    # Where a text ends here, the longer ones are tried first (greedy), then this one.
    return f"(?:{body})?" if "" in node else body


def spans_of(pattern: re.Pattern[str] | None, text: str) -> list[tuple[int, int]]:
    """Where pattern matches in text, in order."""
    if pattern is None:
        return []
    return [match.span() for match in pattern.finditer(text)]


__all__ = ["FindControl", "PromptPrep", "Shield", "Spans", "literal_bytes_pattern", "literal_pattern", "spans_of"]
