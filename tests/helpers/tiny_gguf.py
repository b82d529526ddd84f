"""A tiny random-weight llama-architecture GGUF that real llama.cpp loads and streams from.

The model knows nothing; it exists so tests can run the real engine end to end in a
fraction of a second. Two properties are built in on purpose:

- It never ends a reply by itself. The output rows of every special and byte token are
  pushed so far down that sampling cannot pick them, so a test can stream hundreds of
  tokens and cancel mid-way. Tests that need a natural end use ``max_tokens`` or a stop
  string.
- Every generated token is a whole printable piece (a word, a letter, a CJK character or
  an emoji), so each streamed token decodes to non-empty, valid text.

Rebuild by hand with ``python -m tests.helpers.tiny_gguf OUT.gguf``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, LlamaFileType, TokenType

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

UNK_ID = 0
BOS_ID = 1
EOS_ID = 2
IM_START_ID = 3
IM_END_ID = 4
FIRST_BYTE_ID = 5
# Everything below this id is a special or byte token, which the model never generates.
FIRST_PIECE_ID = FIRST_BYTE_ID + 256

_SPECIAL_TOKENS = (
    ("<unk>", TokenType.UNKNOWN),
    ("<s>", TokenType.CONTROL),
    ("</s>", TokenType.CONTROL),
    ("<|im_start|>", TokenType.CONTROL),
    ("<|im_end|>", TokenType.CONTROL),
)
_WORDS = (
    "the be to of and a in that have I it for not on with he as you do at this but his by "
    "from they we say her she or an will my one all would there their what so up out if "
    "about who get which go me when make can like time no just him know take people into "
    "year your good some could them see other than then now look only come its over think "
    "also back after use two how our work first well way even new want because any these "
    "give day most us is are was were has had been model token hello world kestrel cancel "
    "pause resume stream reply chat test quick brown fox jumps lazy dog yes okay sure"
).split()
_WHOLE_PIECES = ("你", "好", "世", "界", "中", "文", "日", "本", "語", "😀", "👍", "🙂")
_SPACE = "\u2581"  # SentencePiece's word-boundary mark.
# Big enough that even a temperature of 10 leaves them some e^-100 behind the rest.
_SUPPRESSED_LOGIT_WEIGHT = -1000.0
# The residual-stream dimension that always holds this value; see _tensors.
_CONSTANT_DIM_VALUE = 1.0


Weights = Callable[[list[str], dict[str, np.ndarray]], None]


def scripted_weights(script: Sequence[str], *, size: float = 10.0, pull: float = 50.0,
                     only_script_rows: bool = False) -> Weights:
    """Weights that make the model a lookup table: each piece of script (token pieces of
    the vocabulary, added tokens included) calls the next, the last one <|im_end|>, so greedy
    or sampled it writes the script after the prompt's last piece (script[0]).

    The layers add nothing, so the last token alone decides the next; each script token's
    embedding sits on a dimension of its own (size) and the following token's output row
    reads that dimension (pull). only_script_rows: clear only the rows the script pulls,
    leaving every other token's random output row (an answer under a grammar then still
    has other tokens to choose from).
    """

    def write(pieces: list[str], tensors: dict[str, np.ndarray]) -> None:
        ids = {piece: number for number, piece in enumerate(pieces)}
        chain = [ids[piece] for piece in script] + [IM_END_ID]
        for name, tensor in tensors.items():
            if name.endswith(("attn_output.weight", "ffn_down.weight")):
                tensor[:] = 0.0
        embedding, output = tensors["token_embd.weight"], tensors["output.weight"]
        if not only_script_rows:
            output[:] = 0.0
        for step, (token, following) in enumerate(zip(chain, chain[1:]), start=1):
            embedding[token, 1:] = 0.0
            embedding[token, step] = size
            if only_script_rows:
                output[following, :] = 0.0
            output[following, step] = pull

    return write


def build_tiny_gguf(
    path: Path,
    *,
    chat_template: str | None = CHATML_TEMPLATE,
    n_layers: int = 2,
    n_embd: int = 64,
    n_ctx_train: int = 2048,
    seed: int = 0,
    name: str = "kestrel-tiny",
    always: int | None = None,
    added_tokens: tuple[str, ...] = (),
    control_tokens: tuple[str, ...] = (),
    weights: Weights | None = None,
) -> Path:
    """Write the tiny model to path (same bytes for the same arguments) and return path.

    always: a token id the model then picks every time (tests of end-of-generation).
    added_tokens: user-defined tokens after the vocabulary (printed as text, as
    `<think>` is in Qwen3). control_tokens: control tokens after those (as gpt-oss's
    harmony tokens are in its GGUF; llama.cpp decides which it prints and which end the
    answer). weights(pieces, tensors) may change the tensors in place.
    """
    n_head = 4
    if n_embd % (n_head * 2) != 0 or n_layers < 1:
        raise ValueError(f"n_embd must be a multiple of {n_head * 2} and n_layers >= 1")
    pieces, scores, types = _vocabulary()
    pieces += list(added_tokens)
    scores += [0.0] * len(added_tokens)
    types += [int(TokenType.USER_DEFINED)] * len(added_tokens)
    pieces += list(control_tokens)
    scores += [0.0] * len(control_tokens)
    types += [int(TokenType.CONTROL)] * len(control_tokens)
    tensors = _tensors(np.random.default_rng(seed), len(pieces), n_layers, n_embd, n_head, always)
    if weights is not None:
        weights(pieces, tensors)

    writer = GGUFWriter(path, "llama")
    writer.add_name(name)
    writer.add_file_type(LlamaFileType.ALL_F32)
    writer.add_vocab_size(len(pieces))
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layers)
    writer.add_feed_forward_length(3 * n_embd)
    writer.add_head_count(n_head)
    # Fewer key/value heads than query heads, as most current models have (GQA).
    writer.add_head_count_kv(n_head // 2)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)

    writer.add_tokenizer_model("llama")
    writer.add_token_list(pieces)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(UNK_ID)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_eot_token_id(IM_END_ID)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    # Off, as in current SentencePiece models (Gemma 3): with it on, llama.cpp would
    # also put a space after every ChatML marker.
    writer.add_add_space_prefix(False)
    if chat_template is not None:
        writer.add_chat_template(chat_template)

    for tensor_name, array in tensors.items():
        writer.add_tensor(tensor_name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _vocabulary() -> tuple[list[str], list[float], list[int]]:
    """Pieces, scores and token types of a SentencePiece-style vocabulary."""
    pieces = [text for text, _ in _SPECIAL_TOKENS]
    types = [int(kind) for _, kind in _SPECIAL_TOKENS]
    pieces += [f"<0x{byte:02X}>" for byte in range(256)]
    types += [int(TokenType.BYTE)] * 256

    normal: list[str] = [_SPACE]
    normal += [chr(c) for c in range(ord("a"), ord("z") + 1)]
    normal += [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    normal += list("0123456789.,!?'\"-:;()")
    normal += list(_WHOLE_PIECES)
    for word in _WORDS:
        # The tokenizer builds a piece only by merging two pieces it already has, so
        # every prefix of a word must be a piece for the whole word to be reachable.
        spelled = _SPACE + word
        normal += [spelled[:end] for end in range(2, len(spelled) + 1)]
    normal = list(dict.fromkeys(normal))

    pieces += normal
    types += [int(TokenType.NORMAL)] * len(normal)
    # Longer pieces score higher, so merges prefer whole words.
    scores = [0.0] * FIRST_PIECE_ID + [float(len(piece)) - 10.0 for piece in normal]
    return pieces, scores, types


def _tensors(
    rng: np.random.Generator, n_vocab: int, n_layers: int, n_embd: int, n_head: int,
    always: int | None = None,
) -> dict[str, np.ndarray]:
    """Random weights, in llama.cpp's tensor names, shaped (out, in) as numpy sees them.

    Dimension 0 of the residual stream is held at a constant: every token embedding has
    it, and no layer writes to it (row 0 of each layer's output projections is zero).
    After the final RMS norm that dimension is therefore always clearly positive, and
    the output rows of the tokens we never want sampled carry a large negative weight
    there and nothing else, so their logits sit hundreds below the rest whatever the
    context. Normal tokens have zero weight on it and random weights elsewhere.
    """

    def normal(shape: tuple[int, ...], scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    n_head_kv = n_head // 2
    n_kv = n_embd // n_head * n_head_kv
    n_ff = 3 * n_embd
    ones = np.ones(n_embd, dtype=np.float32)

    embedding = normal((n_vocab, n_embd), 0.1)
    embedding[:, 0] = _CONSTANT_DIM_VALUE
    output = normal((n_vocab, n_embd), 0.5)
    output[:, 0] = 0.0
    output[:FIRST_PIECE_ID, :] = 0.0
    output[:FIRST_PIECE_ID, 0] = _SUPPRESSED_LOGIT_WEIGHT
    if always is not None:
        output[always, 0] = -_SUPPRESSED_LOGIT_WEIGHT

    tensors = {"token_embd.weight": embedding}
    for layer in range(n_layers):
        attn_output = normal((n_embd, n_embd), 0.5 / np.sqrt(n_embd))
        attn_output[0, :] = 0.0
        ffn_down = normal((n_embd, n_ff), 0.5 / np.sqrt(n_ff))
        ffn_down[0, :] = 0.0
        prefix = f"blk.{layer}."
        tensors.update({
            prefix + "attn_norm.weight": ones.copy(),
            prefix + "attn_q.weight": normal((n_embd, n_embd), 1 / np.sqrt(n_embd)),
            prefix + "attn_k.weight": normal((n_kv, n_embd), 1 / np.sqrt(n_embd)),
            prefix + "attn_v.weight": normal((n_kv, n_embd), 1 / np.sqrt(n_embd)),
            prefix + "attn_output.weight": attn_output,
            prefix + "ffn_norm.weight": ones.copy(),
            prefix + "ffn_gate.weight": normal((n_ff, n_embd), 1 / np.sqrt(n_embd)),
            prefix + "ffn_up.weight": normal((n_ff, n_embd), 1 / np.sqrt(n_embd)),
            prefix + "ffn_down.weight": ffn_down,
        })
    tensors["output_norm.weight"] = ones.copy()
    tensors["output.weight"] = output
    return tensors


def main(argv: list[str]) -> int:
    """Build the tiny model at the path given on the command line."""
    if len(argv) != 1:
        print("usage: python -m tests.helpers.tiny_gguf OUT.gguf", file=sys.stderr)
        return 2
    out = build_tiny_gguf(Path(argv[0]))
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
