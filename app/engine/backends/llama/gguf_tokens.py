"""A GGUF model's special tokens as text, read from llama.cpp once it has loaded the model."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

import llama_cpp

from app.engine.templates.chat_format import ModelTokens, end_of_turn_markers
from app.engine.templates.outside_text import literal_bytes_pattern, literal_pattern
from app.library.model_files.gguf_info import GgufInfo


# The GGUF keys that name end-of-generation tokens.
_EOG_KEYS = ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")
# The other special tokens transformers gives a template, by the GGUF key of their id
# ("seperator" is spelt so in the GGUF specification).
_OTHER_KEYS = (("unk_token", "tokenizer.ggml.unknown_token_id"), ("pad_token", "tokenizer.ggml.padding_token_id"),
               ("sep_token", "tokenizer.ggml.seperator_token_id"), ("cls_token", "tokenizer.ggml.cls_token_id"),
               ("mask_token", "tokenizer.ggml.mask_token_id"))


def model_tokens(llm: llama_cpp.Llama, info: GgufInfo) -> ModelTokens:
    """bos and eos as text, and the texts of the tokens that end the model's turn.

    llama.cpp's end-of-generation set (llama_vocab_is_eog) is the eos/eot/eom tokens the
    GGUF names plus control tokens it recognises by their text (<|im_end|>, <end_of_turn>).
    Asking it about every token took 0.14-0.2 s on the 262,144-token starter model, a fifth
    of its load, so it is asked only about the likely ones: the ids the GGUF names and the
    single-token turn markers of the model's chat format.
    """
    model = llm._model
    tokens = ModelTokens(bos=_token_text(model, model.token_bos()), eos=_token_text(model, model.token_eos()))
    candidates = {model.token_eos(), llama_cpp.llama_vocab_eot(model.vocab)}
    candidates.update(_metadata_id(llm.metadata, key) for key in _EOG_KEYS)
    for marker in end_of_turn_markers(info.chat_template, info.architecture, tokens):
        ids = llm.tokenize(marker.encode("utf-8"), add_bos=False, special=True)
        if len(ids) == 1:
            candidates.add(ids[0])
    texts = [_token_text(model, token) for token in sorted(candidates)
             if token >= 0 and llama_cpp.llama_vocab_is_eog(model.vocab, token)]
    # An id past the vocabulary (a damaged file) would make llama.cpp abort: checked first.
    others: list[tuple[str, str]] = []
    for name, key in _OTHER_KEYS:
        token = _metadata_id(llm.metadata, key)
        if token < model.n_vocab():
            others.append((name, _token_text(model, token)))
    return ModelTokens(tokens.bos, tokens.eos, end_of_generation=tuple(text for text in texts if text),
                       others=tuple((name, text) for name, text in others if text))


def _metadata_id(metadata: dict[str, str], key: str) -> int:
    try:
        return int(metadata.get(key, -1))
    except ValueError:
        return -1


def _token_text(model: llama_cpp._internals.LlamaModel, token: int) -> str:
    if token < 0:
        return ""
    try:
        return model.token_get_text(token)
    except (UnicodeDecodeError, ValueError):
        return ""


# What llama.cpp's tokenizer splits out of text before anything else: control and unknown
# tokens only when asked to parse special tokens, user-defined ones always.
_CONTROL_ATTRS = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
_SPECIAL_ATTRS = _CONTROL_ATTRS | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED


@dataclass(frozen=True)
class Special:
    """One special token: its id, whether it is a control (or unknown) token, and whether
    llama.cpp strips the whitespace before (lstrip) or after it (rstrip)."""

    id: int
    control: bool
    lstrip: bool
    rstrip: bool


@dataclass(frozen=True)
class SpecialTokens:
    """The vocabulary's special tokens by their text (UTF-8 bytes, as llama.cpp matches
    them), with patterns that find them: every one, the user-defined ones, and the control
    ones in text (app/engine/templates/outside_text.py escapes those)."""

    by_text: Mapping[bytes, Special]
    every: re.Pattern[bytes] | None
    user_defined: re.Pattern[bytes] | None
    control: re.Pattern[str] | None

    @classmethod
    def read(cls, model: llama_cpp._internals.LlamaModel) -> "SpecialTokens":
        """Ask llama.cpp about every token (0.1-0.3 s for a 262,144-token vocabulary, so
        GgufBackend does it on a thread of its own while the model is put to use)."""
        vocab = model.vocab
        attr_of = llama_cpp.llama_vocab_get_attr
        by_text: dict[bytes, Special] = {}
        for token in range(model.n_vocab()):
            attr = attr_of(vocab, token)
            if attr & _SPECIAL_ATTRS:
                text = llama_cpp.llama_vocab_get_text(vocab, token) or b""
                if text and text not in by_text:
                    by_text[text] = Special(token, bool(attr & _CONTROL_ATTRS),
                                            bool(attr & llama_cpp.LLAMA_TOKEN_ATTR_LSTRIP),
                                            bool(attr & llama_cpp.LLAMA_TOKEN_ATTR_RSTRIP))
        return cls.of(by_text)

    @classmethod
    def of(cls, by_text: Mapping[bytes, Special]) -> "SpecialTokens":
        user = [text for text, special in by_text.items() if not special.control]
        control = [_decoded(text) for text, special in by_text.items() if special.control]
        return cls(by_text, _bytes_pattern(list(by_text)), _bytes_pattern(user),
                   _text_pattern([text for text in control if text]))


def _decoded(text: bytes) -> str:
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        return ""  # only ever a piece of a character: it cannot be found in text whole


def _bytes_pattern(texts: list[bytes]) -> re.Pattern[bytes] | None:
    return re.compile(literal_bytes_pattern(texts)) if texts else None


def _text_pattern(texts: list[str]) -> re.Pattern[str] | None:
    return re.compile(literal_pattern(texts)) if texts else None
