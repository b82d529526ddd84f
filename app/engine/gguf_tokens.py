"""A GGUF model's special tokens as text, read from llama.cpp once it has loaded the model."""

from __future__ import annotations

import llama_cpp

from app.engine.chat_format import ModelTokens, end_of_turn_markers
from app.library.gguf_info import GgufInfo


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
