"""A GGUF prompt's tokens: the template's markers as control tokens, outside text as text,
in time that grows with the prompt, not with its square.

llama.cpp's tokenizer splits special tokens out of the text first, then tokenizes the
pieces between them. With special tokens parsed, every control token's text becomes that
token wherever it stands; and the split costs a walk of the list of pieces for each token
it finds (llama_vocab::impl::tokenizer_st_partition), so a prompt of 20,000 short messages
took 11.5 s, and 20,000 newlines (a user-defined token of Gemma 3) 21 s.

So the split is done here: every special token's place is found at once (a trie pattern,
app/engine/backends/llama/gguf_tokens.py), in the same order of preference (the longest first) and with
the same stripping of whitespace around the tokens that ask for it. A control token the
template wrote becomes its id; a control token's text that came from outside
(PromptSpec.plain) stays in the text. The text between control tokens goes to llama.cpp
with special-token parsing off, in stretches of at most a few hundred user-defined tokens
(which llama.cpp splits out itself): llama.cpp sees each stretch as it would have seen it
inside the whole prompt, so a prompt without outside control-token text gets the very ids
the whole-prompt tokenizing gave (tests/engine/test_prompt_tokens.py holds them equal).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Callable, Sequence

import llama_cpp

from app.engine.control import PromptCancelled
from app.engine.backends.llama.gguf_tokens import Special, SpecialTokens
from app.engine.templates.outside_text import Spans, spans_of

# Whitespace as C's isspace sees it: what llama.cpp strips beside an lstrip/rstrip token.
_WHITESPACE = frozenset(b" \t\n\v\f\r")
# User-defined tokens llama.cpp splits out of one stretch: its split walks a list per
# token found, so a stretch costs the square of this.
_STRETCH_TOKENS = 128
# Tokenizer calls, and special tokens placed, between two looks at the cancel flag.
_CALLS_PER_LOOK = 32
_PIECES_PER_LOOK = 4096

# A piece of the prompt: (start, end) of raw text, or (start, end, the special token there).
_Piece = tuple[int, int, Special | None]


class GgufPromptTokens:
    """Tokenizes prompts and texts with one model's vocabulary (thread-safe: llama.cpp's
    tokenizer only reads the vocabulary)."""

    def __init__(self, vocab: llama_cpp.llama_vocab_p, specials: Callable[[], SpecialTokens], *,
                 add_bos: bool, add_eos: bool, bos_id: int, eos_id: int, bos_text: str,
                 reading: Future[SpecialTokens] | None = None) -> None:
        self._vocab = vocab
        self._specials = specials
        self._add_bos = add_bos
        self._add_eos = add_eos
        self._bos_id = bos_id
        self._eos_id = eos_id
        self._bos_text = bos_text
        self._reading = reading

    @classmethod
    def reading(cls, model: llama_cpp._internals.LlamaModel, bos_text: str) -> "GgufPromptTokens":
        """The model's prompt tokenizer; its special tokens are read on a thread of their own
        (a large vocabulary takes a few tenths of a second): the first prompt waits for
        them, the model's load does not. close() before the model is freed."""
        specials: Future[SpecialTokens] = Future()

        def read() -> None:
            try:
                specials.set_result(SpecialTokens.read(model))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for them
                specials.set_exception(exc)

        threading.Thread(target=read, name="special-tokens", daemon=True).start()
        vocab = model.vocab
        return cls(vocab, specials.result, add_bos=bool(model.add_bos_token()),
                   add_eos=bool(llama_cpp.llama_vocab_get_add_eos(vocab)), bos_id=model.token_bos(),
                   eos_id=model.token_eos(), bos_text=bos_text, reading=specials)

    def close(self) -> None:
        """Wait until the vocabulary is no longer being read (it is about to be freed)."""
        if self._reading is not None:
            self._reading.exception()

    def control_spans(self, text: str) -> list[tuple[int, int]]:
        """Where text holds a control token's text (outside_text.Shield escapes those)."""
        return spans_of(self._specials().control, text)

    def prompt(self, text: str, plain: Spans = (), cancelled: Callable[[], bool] | None = None) -> list[int]:
        """A whole prompt: BOS in front where the model wants one and the template did not
        write it (as llama-cpp-python's chat handlers decide), EOS behind where the
        vocabulary adds one; then text()."""
        before, after = self.ends(text, plain)
        return before + self.text(text, plain, cancelled) + after

    def ends(self, text: str, plain: Spans = ()) -> tuple[list[int], list[int]]:
        """The ids a prompt of this text gets before and after its own (a BOS's text at its
        start from outside is no BOS the template wrote)."""
        written = bool(self._bos_text) and text.startswith(self._bos_text) and not (plain and plain[0][0] == 0)
        if not self._add_bos or written:
            return [], []
        return [self._bos_id], [self._eos_id] if self._add_eos else []

    def text(self, text: str, plain: Spans = (), cancelled: Callable[[], bool] | None = None) -> list[int]:
        """The ids of text inside a prompt (no BOS): its control-token text read as control
        tokens, except at the plain spans, which are read as text."""
        if not text:
            return []
        data = text.encode("utf-8")
        plain_bytes = _byte_spans(text, plain)
        return self._ids(data, _pieces(data, self._specials(), plain_bytes, cancelled), cancelled)

    def plain_text(self, text: str) -> list[int]:
        """The ids of text from outside inside a prompt: every control token's text in it as text."""
        return self.text(text, tuple(self.control_spans(text)))

    def _ids(self, data: bytes, pieces: list[_Piece], cancelled: Callable[[], bool] | None) -> list[int]:
        ids: list[int] = []
        stretch: list[bytes] = []
        counted = calls = 0

        def flush() -> None:
            nonlocal counted, calls
            if stretch:
                ids.extend(self._tokenize(b"".join(stretch)))
                stretch.clear()
                calls += 1
                if cancelled is not None and calls % _CALLS_PER_LOOK == 0 and cancelled():
                    raise PromptCancelled()
            counted = 0

        for start, end, special in pieces:
            if special is not None and special.control:
                flush()
                ids.append(special.id)
                continue
            stretch.append(data[start:end])
            if special is not None:
                counted += 1
                if counted >= _STRETCH_TOKENS:
                    flush()  # right after a special token: the next stretch starts as llama.cpp's would
        flush()
        return ids

    def _tokenize(self, data: bytes) -> list[int]:
        """llama_tokenize without special-token parsing, into a buffer sized by the text
        (llama-cpp-python's Llama.tokenize allocates the whole trained context each call)."""
        size = len(data) + 1
        buffer = (llama_cpp.llama_token * size)()
        count = llama_cpp.llama_tokenize(self._vocab, data, len(data), buffer, size, False, False)
        if count < 0:
            size = -count
            buffer = (llama_cpp.llama_token * size)()
            count = llama_cpp.llama_tokenize(self._vocab, data, len(data), buffer, size, False, False)
            if count < 0:
                raise RuntimeError(f"llama.cpp could not tokenize {len(data):,} bytes of the prompt")
        return buffer[:count]


def _pieces(data: bytes, specials: SpecialTokens, plain: Spans,
            cancelled: Callable[[], bool] | None = None) -> list[_Piece]:
    """The text cut at its special tokens (none but user-defined ones inside the plain
    spans), whitespace stripped beside the tokens that strip it."""
    found: list[tuple[int, int, Special]] = []
    done = 0
    for start, end in (*plain, (len(data), len(data))):
        for pattern, stop in ((specials.every, start), (specials.user_defined, end)):
            if pattern is not None and done < stop:
                for match in pattern.finditer(data, done, stop):
                    if cancelled is not None and len(found) % _PIECES_PER_LOOK == 0 and cancelled():
                        raise PromptCancelled()
                    found.append((match.start(), match.end(), specials.by_text[match.group()]))
            done = stop
    pieces: list[_Piece] = []
    done = 0
    before: Special | None = None
    for index, (start, end, special) in enumerate(found):
        if cancelled is not None and index % _PIECES_PER_LOOK == 0 and cancelled():
            raise PromptCancelled()
        raw_start, raw_end = done, start
        if before is not None and before.rstrip:
            while raw_start < raw_end and data[raw_start] in _WHITESPACE:
                raw_start += 1
        if special.lstrip:
            while raw_end > raw_start and data[raw_end - 1] in _WHITESPACE:
                raw_end -= 1
        if raw_start < raw_end:
            pieces.append((raw_start, raw_end, None))
        pieces.append((start, end, special))
        done, before = end, special
    raw_start = done
    if before is not None and before.rstrip:
        while raw_start < len(data) and data[raw_start] in _WHITESPACE:
            raw_start += 1
    if raw_start < len(data):
        pieces.append((raw_start, len(data), None))
    return pieces


def _byte_spans(text: str, spans: Sequence[tuple[int, int]]) -> Spans:
    """Character spans of text as spans of its UTF-8 bytes (spans in order)."""
    if not spans:
        return ()
    result: list[tuple[int, int]] = []
    chars = offset = 0
    for start, end in spans:
        offset += len(text[chars:start].encode("utf-8"))
        length = len(text[start:end].encode("utf-8"))
        result.append((offset, offset + length))
        offset += length
        chars = end
    return tuple(result)
