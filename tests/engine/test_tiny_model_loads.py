"""The tiny test model from tests/helpers/tiny_gguf.py loads and streams in real llama.cpp.

The tiny_model fixture comes from tests/conftest.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.helpers.tiny_gguf import (
    BOS_ID,
    CHATML_TEMPLATE,
    EOS_ID,
    FIRST_PIECE_ID,
    IM_END_ID,
    IM_START_ID,
    build_tiny_gguf,
)

llama_cpp = pytest.importorskip("llama_cpp")

CHATML_PROMPT = "<|im_start|>user\nSay something long.<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def llm(tiny_model: Path) -> Iterator[llama_cpp.Llama]:
    model = llama_cpp.Llama(model_path=str(tiny_model), n_ctx=512, seed=1, verbose=False)
    yield model
    model.close()


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    first = build_tiny_gguf(tmp_path / "a.gguf", seed=3)
    second = build_tiny_gguf(tmp_path / "b.gguf", seed=3)
    other = build_tiny_gguf(tmp_path / "c.gguf", seed=4)

    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() != other.read_bytes()
    assert first.stat().st_size < 5 << 20


def test_metadata_is_what_llama_cpp_reads(llm: llama_cpp.Llama) -> None:
    assert llm.metadata["general.architecture"] == "llama"
    assert llm.metadata["general.name"] == "kestrel-tiny"
    assert llm.metadata["tokenizer.chat_template"] == CHATML_TEMPLATE
    assert (llm.token_bos(), llm.token_eos()) == (BOS_ID, EOS_ID)
    assert llama_cpp.llama_model_n_ctx_train(llm.model) == 2048
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    assert llama_cpp.llama_vocab_eot(vocab) == IM_END_ID
    assert llama_cpp.llama_vocab_is_eog(vocab, IM_END_ID)
    assert llama_cpp.llama_vocab_is_eog(vocab, EOS_ID)


def test_no_template_when_asked(tmp_path: Path) -> None:
    path = build_tiny_gguf(tmp_path / "plain.gguf", chat_template=None)
    model = llama_cpp.Llama(model_path=str(path), n_ctx=64, verbose=False)
    try:
        assert "tokenizer.chat_template" not in model.metadata
    finally:
        model.close()


def test_chatml_markers_are_single_tokens(llm: llama_cpp.Llama) -> None:
    tokens = llm.tokenize(CHATML_PROMPT.encode(), add_bos=True, special=True)

    assert tokens[0] == BOS_ID
    assert tokens.count(IM_START_ID) == 2
    assert tokens.count(IM_END_ID) == 1
    as_text = llm.tokenize(CHATML_PROMPT.encode(), add_bos=False, special=False)
    assert IM_START_ID not in as_text


@pytest.mark.parametrize("text", ["hello world", "Grüße 你好世界 😀👍 ∑ emoji🦜", "a\n\tb"])
def test_any_text_round_trips(llm: llama_cpp.Llama, text: str) -> None:
    tokens = llm.tokenize(text.encode(), add_bos=False)

    assert llm.detokenize(tokens).decode().strip() == text.strip()


def test_end_tokens_are_never_likely(tiny_model: Path) -> None:
    model = llama_cpp.Llama(model_path=str(tiny_model), n_ctx=512, logits_all=True,
                            verbose=False)
    try:
        model.create_completion(CHATML_PROMPT, max_tokens=200, temperature=2.0, top_k=0,
                                top_p=1.0, min_p=0.0, seed=5)
        logits = model.scores[:model.n_tokens]
    finally:
        model.close()

    # At every position, in the prompt and in the reply, every special and byte token
    # sits far below the best ordinary piece.
    margins = logits[:, FIRST_PIECE_ID:].max(axis=1) - logits[:, :FIRST_PIECE_ID].max(axis=1)
    assert len(margins) > 200
    assert margins.min() > 500


def test_greedy_generation_runs_to_the_limit(llm: llama_cpp.Llama) -> None:
    result = llm.create_completion(CHATML_PROMPT, max_tokens=300, temperature=0.0)

    assert result["choices"][0]["finish_reason"] == "length"
    assert result["usage"]["completion_tokens"] == 300
    assert result["choices"][0]["text"].strip()


def test_sampled_stream_yields_text_for_every_token(llm: llama_cpp.Llama) -> None:
    chunks = list(llm.create_completion(CHATML_PROMPT, max_tokens=300, temperature=0.8,
                                        seed=7, stream=True))

    texts = [chunk["choices"][0]["text"] for chunk in chunks]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert sum(1 for text in texts if text) >= 290
    assert len(set(texts)) > 20


def test_stop_string_ends_a_reply(llm: llama_cpp.Llama) -> None:
    greedy = llm.create_completion(CHATML_PROMPT, max_tokens=40, temperature=0.0)
    text = greedy["choices"][0]["text"]
    stop = text[len(text) // 2:len(text) // 2 + 3]

    result = llm.create_completion(CHATML_PROMPT, max_tokens=40, temperature=0.0, stop=[stop])

    assert result["choices"][0]["finish_reason"] == "stop"
    assert stop not in result["choices"][0]["text"]
