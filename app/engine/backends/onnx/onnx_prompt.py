"""An ONNX model's prompt tokens: the template's markers as special tokens, outside
control-token text as text, as far as ONNX Runtime GenAI's tokenizer lets it be.

GenAI's Tokenizer.encode (0.18) always reads an added token's text as that token: its
options are add_special_tokens and skip_special_tokens, and "split_special_tokens" is
refused ("Invalid tokenizer option key"). So a control token's text from outside
(PromptSpec.plain, app/engine/templates/outside_text.py) is encoded in pieces none of which holds
a special token's whole text ("<" and "|im_end|>"), each after an anchor (a special
token, whose ids are then dropped) so that it is read as text following a marker. The
ids are the same characters as text, though not always the ids the text would get in one
piece. A prompt without such text is encoded whole, as before.

The special tokens come from the folder's tokenizer_config.json (added_tokens_decoder,
those marked special), or the head of tokenizer.json (added_tokens) when it has none.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

import onnxruntime_genai as og

from app.engine.templates.outside_text import Spans, literal_pattern

# tokenizer_config.json files run to a few MB (models with thousands of added tokens).
_MAX_CONFIG_BYTES = 32 * 1024 * 1024
# tokenizer.json lists its added tokens near its top; the whole file is tens of MB.
_HEAD_BYTES = 4 * 1024 * 1024


class OnnxPromptTokens:
    """Encodes prompts and texts with one model's GenAI tokenizer."""

    def __init__(self, tokenizer: og.Tokenizer, special_texts: Sequence[str], *, bos_text: str) -> None:
        self._tokenizer = tokenizer
        self._bos_text = bos_text
        # Some tokenizers put BOS in front on their own; the template may write it too.
        self._adds_bos = bool(bos_text) and _starts_with(self._encode("a"), tokenizer.bos_token_id)
        texts = [text for text in special_texts if text]
        self.control = re.compile(literal_pattern(texts)) if texts else None
        self._anchor, self._lead, self._tail = self._find_anchor(texts)

    def prompt(self, text: str, plain: Spans = ()) -> list[int]:
        """A whole prompt's ids: one BOS, where the tokenizer puts one; plain spans as text."""
        if self._adds_bos and text.startswith(self._bos_text) and not (plain and plain[0][0] == 0):
            text = text[len(self._bos_text):]
            plain = tuple((start - len(self._bos_text), end - len(self._bos_text)) for start, end in plain)
        if not plain:
            return self._encode(text)
        ids = self._encode(text[:plain[0][0]])
        done = plain[0][0]
        for start, end in plain:
            if start > done:
                ids += self._after_anchor(text[done:start])
            for piece in self._unmatched(text[start:end]):
                ids += self._after_anchor(piece)
            done = end
        if done < len(text):
            ids += self._after_anchor(text[done:])
        return ids

    def count(self, text: str) -> int:
        """Tokens of text from outside inside a prompt: its control-token text as text, the
        tokenizer's own BOS not counted (a prompt has one)."""
        spans = tuple(match.span() for match in self.control.finditer(text)) if self.control else ()
        tokens = self.prompt(text, spans)
        adds = self._adds_bos and _starts_with(tokens, self._tokenizer.bos_token_id)
        return len(tokens) - 1 if adds else len(tokens)

    def _encode(self, text: str) -> list[int]:
        return [int(token) for token in self._tokenizer.encode(text)]

    def _after_anchor(self, text: str) -> list[int]:
        """text's ids as text after a special token reads (the anchor's, and any the
        tokenizer puts around everything, dropped)."""
        ids = self._encode(self._anchor + text)
        return ids[self._lead:len(ids) - self._tail]

    def _unmatched(self, text: str) -> list[str]:
        """text cut so that no piece holds a special token's whole text: each cut falls one
        character into the first such text left."""
        pieces: list[str] = []
        while text:
            match = self.control.search(text) if self.control is not None else None
            cut = match.start() + 1 if match is not None else len(text)
            pieces.append(text[:cut])
            text = text[cut:]
        return pieces

    def _find_anchor(self, texts: list[str]) -> tuple[str, int, int]:
        """A special token that encodes to one id of its own, how many ids the tokenizer puts
        before it and it (its BOS, if any, and the anchor), and how many after (an EOS some
        tokenizers add). Without one, the pieces are encoded alone (a tokenizer that puts a
        space before each text then puts one before each piece)."""
        around = self._encode("")
        head = 1 if self._adds_bos and _starts_with(around, self._tokenizer.bos_token_id) else 0
        for text in sorted(texts, key=len):
            if len(self._encode(text)) == len(around) + 1:
                return text, head + 1, len(around) - head
        return "", head, len(around) - head


def special_texts(folder: Path, *also: str) -> tuple[str, ...]:
    """The texts of a model folder's special added tokens (and also's), or none when the
    folder does not say (outside text is then tokenized as before)."""
    found = _from_config(folder / "tokenizer_config.json")
    if found is None:
        found = _from_tokenizer_head(folder / "tokenizer.json")
    return tuple(dict.fromkeys([*(found or ()), *also]))


def _from_config(file: Path) -> list[str] | None:
    try:
        if file.stat().st_size > _MAX_CONFIG_BYTES:
            return None
        value = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    decoder = value.get("added_tokens_decoder") if isinstance(value, dict) else None
    if not isinstance(decoder, dict):
        return None
    return _special(decoder.values())


def _from_tokenizer_head(file: Path) -> list[str] | None:
    try:
        with file.open("rb") as stream:
            head = stream.read(_HEAD_BYTES).decode("utf-8", "ignore")
        start = head.find("[", head.index('"added_tokens"'))
        value, _ = json.JSONDecoder().raw_decode(head, start)
    except (OSError, ValueError, RecursionError):
        return None
    return _special(value) if isinstance(value, list) else None


def _special(tokens: Any) -> list[str]:
    return [token["content"] for token in tokens
            if isinstance(token, dict) and token.get("special") and isinstance(token.get("content"), str)]


def _starts_with(tokens: Sequence[int], token: int | None) -> bool:
    return token is not None and len(tokens) > 0 and int(tokens[0]) == int(token)


__all__ = ["OnnxPromptTokens", "special_texts"]
