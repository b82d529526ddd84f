"""A tiny random-weight BERT embedding GGUF that real llama.cpp loads and embeds from.

The model knows nothing; its vectors only need to be deterministic (same text, same
vector), to differ between texts and to come from llama.cpp's real BERT graph with mean
pooling, so the embedding process can be tested end to end in a fraction of a second.
Its WordPiece vocabulary holds the special tokens, every printable ASCII character (as a
word start and as a "##" continuation) and a few hundred words, so any English text
tokenizes without [UNK] everywhere.

abort_on_embed=True writes the token-type table in f16: llama.cpp loads the file, then
aborts the process (GGML_ABORT in its CPU add, which has no f32 + f16 form) on the first
text, a real native crash for the tests of crash handling.

Rebuild by hand with ``python -m tests.helpers.embedding_gguf OUT.gguf``.
"""

from __future__ import annotations

import string
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, LlamaFileType, PoolingType, TokenType

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(len(SPECIAL_TOKENS))
_WORDS = (
    "the be to of and a in that have it for not on with he as you do at this but his by from "
    "they we say her she or an will my one all would there their what so up out if about who "
    "get which go me when make can like time no just him know take people into year your good "
    "some could them see other than then now look only come its over think also back after use "
    "two how our work first well way even new want because any these give day most us is are "
    "was were has had been weather lovely today sunny outside drove stadium cat dog sat mat "
    "document page report file folder search index chunk vector model kestrel chat answer "
    "question source heading text embedding python code money bank river water fire"
).split()
_SPACE = "\u2581"  # llama.cpp's mark of a word start in a WordPiece vocabulary.


def vocabulary() -> list[str]:
    """Special tokens, then every printable ASCII character as a word start and as a
    continuation, then the words (all lower case: the tokenizer lower-cases its input)."""
    characters = [c for c in string.printable if c.isprintable() and not c.isspace() and not c.isupper()]
    pieces = list(SPECIAL_TOKENS)
    pieces += [_SPACE + c for c in characters] + list(characters)
    pieces += [_SPACE + word for word in _WORDS if _SPACE + word not in pieces]
    return pieces


def build_embedding_gguf(path: Path, *, n_embd: int = 32, n_layers: int = 2, n_ctx_train: int = 128,
                         seed: int = 0, name: str = "kestrel-tiny-embed", abort_on_embed: bool = False) -> Path:
    """Write the tiny model to path (same bytes for the same arguments) and return path."""
    n_head = 4
    if n_embd % n_head != 0 or n_layers < 1:
        raise ValueError(f"n_embd must be a multiple of {n_head} and n_layers >= 1")
    pieces = vocabulary()
    types = [int(TokenType.CONTROL)] * len(SPECIAL_TOKENS) + [int(TokenType.NORMAL)] * (len(pieces) - len(SPECIAL_TOKENS))
    rng = np.random.default_rng(seed)

    writer = GGUFWriter(path, "bert")
    writer.add_name(name)
    writer.add_file_type(LlamaFileType.ALL_F32)
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(4 * n_embd)
    writer.add_block_count(n_layers)
    writer.add_head_count(n_head)
    writer.add_layer_norm_eps(1e-12)
    writer.add_causal_attention(False)
    writer.add_pooling_type(PoolingType.MEAN)
    writer.add_token_type_count(2)
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("bert-bge")
    writer.add_token_list(pieces)
    writer.add_token_types(types)
    writer.add_bos_token_id(CLS_ID)
    writer.add_eos_token_id(SEP_ID)
    writer.add_unk_token_id(UNK_ID)
    writer.add_sep_token_id(SEP_ID)
    writer.add_pad_token_id(PAD_ID)
    writer.add_mask_token_id(MASK_ID)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)

    for tensor_name, tensor in _tensors(rng, len(pieces), n_embd, n_layers, n_ctx_train).items():
        if abort_on_embed and tensor_name == "token_types.weight":
            tensor = tensor.astype(np.float16)
        writer.add_tensor(tensor_name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _tensors(rng: np.random.Generator, n_vocab: int, n_embd: int, n_layers: int,
             n_ctx_train: int) -> dict[str, np.ndarray]:
    """Small random weights in llama.cpp's BERT layout (numpy shapes are GGUF's reversed:
    a matrix from n_in to n_out is stored as (n_out, n_in)), with unit layer norms."""

    def random(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def norm(prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.weight": np.ones(n_embd, dtype=np.float32),
                f"{prefix}.bias": np.zeros(n_embd, dtype=np.float32)}

    tensors = {
        "token_embd.weight": random(n_vocab, n_embd, scale=1.0),
        "token_types.weight": random(2, n_embd),
        "position_embd.weight": random(n_ctx_train, n_embd),
        **norm("token_embd_norm"),
    }
    for layer in range(n_layers):
        block = f"blk.{layer}"
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensors[f"{block}.{part}.weight"] = random(n_embd, n_embd)
            tensors[f"{block}.{part}.bias"] = random(n_embd, scale=0.02)
        tensors.update(norm(f"{block}.attn_output_norm"))
        tensors[f"{block}.ffn_up.weight"] = random(4 * n_embd, n_embd)
        tensors[f"{block}.ffn_up.bias"] = random(4 * n_embd, scale=0.02)
        tensors[f"{block}.ffn_down.weight"] = random(n_embd, 4 * n_embd)
        tensors[f"{block}.ffn_down.bias"] = random(n_embd, scale=0.02)
        tensors.update(norm(f"{block}.layer_output_norm"))
    return tensors


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.helpers.embedding_gguf OUT.gguf")
    print(build_embedding_gguf(Path(sys.argv[1])))
