"""Builds tests/fixtures/tiny-onnx: a tiny random-weight model in the ONNX Runtime GenAI layout.

The model knows nothing; it exists so tests can run the real ONNX Runtime GenAI engine
end to end in a fraction of a second. Like the tiny GGUF (tests/helpers/tiny_gguf.py):

- It never ends a reply by itself: the output rows of the special tokens, and of every
  token that is not whole UTF-8 text on its own, are pushed so far down that sampling
  cannot pick them. A test can stream hundreds of tokens and cancel mid-way; tests
  that need an end use max_tokens or a stop string.
- Every generated token is a whole printable piece (a word, a letter, a CJK character,
  an emoji). "🦜" has no token of its own: it encodes to pieces that are not UTF-8 on
  their own, for tests of whole-character streaming.

The tokenizer is a byte-level BPE (the Qwen2/GPT-2 kind) written out by hand, so nothing
is trained or downloaded and the same script always writes the same vocabulary.

It needs torch, transformers, tokenizers, onnx, onnx-ir and onnxruntime-genai, which are
tools for making the fixture only, not dependencies of Kestrel; see
tests/fixtures/tiny-onnx/README.md for the separate virtual environment to run it in:

    /tmp/fixture-venv/bin/python scripts/make_tiny_onnx_model.py [OUT_DIR]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "tiny-onnx"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_WORDS = (
    "the be to of and a in that have I it for not on with he as you do at this but his by "
    "from they we say her she or an will my one all would there their what so up out if "
    "about who get which go me when make can like time no just him know take people into "
    "year your good some could them see other than then now look only come its over think "
    "also back after use two how our work first well way even new want because any these "
    "give day most us is are was were has had been model token hello world kestrel cancel "
    "pause resume stream reply chat test quick brown fox jumps lazy dog yes okay sure"
).split()
_WHOLE_PIECES = ("你", "好", "世", "界", "中", "文", "日", "本", "語", "😀", "👍", "🙂", "Grüße")
N_LAYERS = 2
N_EMBD = 64
N_HEAD = 4
N_HEAD_KV = 2
N_FF = 3 * N_EMBD
CONTEXT_LENGTH = 2048
SEED = 0
# Big enough that even a temperature of 10 leaves them some e^-100 behind the rest.
_SUPPRESSED_LOGIT_WEIGHT = -1000.0


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from bytes to printable characters, which byte-level BPE spells in."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, chars)}


BYTE_CHARS = _bytes_to_unicode()


def _spell(text: str) -> str:
    return "".join(BYTE_CHARS[b] for b in text.encode("utf-8"))


def vocabulary() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Byte-level BPE vocabulary and merges: 256 bytes, then words built left to right."""
    vocab = {BYTE_CHARS[b]: i for i, b in enumerate(sorted(BYTE_CHARS))}
    merges: list[tuple[str, str]] = []
    targets = [" " + word for word in _WORDS] + [word for word in _WORDS] + list(_WHOLE_PIECES)
    for target in targets:
        spelled = _spell(target)
        for end in range(2, len(spelled) + 1):
            piece = spelled[:end]
            if piece not in vocab:
                vocab[piece] = len(vocab)
                merges.append((spelled[:end - 1], spelled[end - 1]))
    return vocab, merges


def piece_bytes(piece: str) -> bytes:
    decode = {char: byte for byte, char in BYTE_CHARS.items()}
    return bytes(decode[c] for c in piece)


def suppressed_ids(vocab: dict[str, int]) -> list[int]:
    """Tokens the model must never pick: not whole UTF-8, or control characters."""
    ids = []
    for piece, token_id in vocab.items():
        try:
            text = piece_bytes(piece).decode("utf-8")
        except UnicodeDecodeError:
            ids.append(token_id)
            continue
        if any(ord(c) < 0x20 and c != "\n" or ord(c) == 0x7F for c in text):
            ids.append(token_id)
    return ids


def write_tokenizer(folder: Path, vocab: dict[str, int], merges: list[tuple[str, str]]) -> dict[str, int]:
    """tokenizer.json and tokenizer_config.json as Hugging Face writes them; returns special ids."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tokenizer.save(str(folder / "tokenizer.json"))
    special = {t: tokenizer.token_to_id(t) for t in SPECIAL_TOKENS}
    config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "add_bos_token": False,
        "add_prefix_space": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "model_max_length": CONTEXT_LENGTH,
        "clean_up_tokenization_spaces": False,
        "errors": "replace",
        "split_special_tokens": False,
        "chat_template": CHATML_TEMPLATE,
        "added_tokens_decoder": {
            str(token_id): {
                "content": text, "lstrip": False, "normalized": False,
                "rstrip": False, "single_word": False, "special": True,
            }
            for text, token_id in special.items()
        },
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n",
                                                  encoding="utf-8")
    return special


def write_hf_model(folder: Path, vocab: dict[str, int], special: dict[str, int]) -> None:
    """A LlamaForCausalLM with the tiny GGUF's weights recipe, saved as safetensors.

    Dimension 0 of the residual stream is held at a constant: every token embedding has
    it, and no layer writes to it (row 0 of each layer's output projections is zero).
    After the final RMS norm that dimension is always clearly positive, and the output
    rows of the tokens never to be sampled carry a large negative weight there and
    nothing else, so their logits sit hundreds below the rest whatever the context.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    n_vocab = len(vocab) + len(SPECIAL_TOKENS)
    config = LlamaConfig(
        vocab_size=n_vocab,
        hidden_size=N_EMBD,
        intermediate_size=N_FF,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=N_HEAD,
        num_key_value_heads=N_HEAD_KV,
        max_position_embeddings=CONTEXT_LENGTH,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=[special["<|im_end|>"], special["<|endoftext|>"]],
        pad_token_id=special["<|endoftext|>"],
        torch_dtype="float32",
    )
    config.architectures = ["LlamaForCausalLM"]
    model = LlamaForCausalLM(config).eval()
    rng = np.random.default_rng(SEED)

    def normal(shape: tuple[int, ...], scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    n_kv = N_EMBD // N_HEAD * N_HEAD_KV
    embedding = normal((n_vocab, N_EMBD), 0.1)
    embedding[:, 0] = 1.0
    output = normal((n_vocab, N_EMBD), 0.5)
    output[:, 0] = 0.0
    hidden = suppressed_ids(vocab) + list(special.values())
    output[hidden, :] = 0.0
    output[hidden, 0] = _SUPPRESSED_LOGIT_WEIGHT
    weights = {"model.embed_tokens.weight": embedding, "lm_head.weight": output,
               "model.norm.weight": np.ones(N_EMBD, np.float32)}
    for layer in range(N_LAYERS):
        o_proj = normal((N_EMBD, N_EMBD), 0.5 / np.sqrt(N_EMBD))
        o_proj[0, :] = 0.0
        down = normal((N_EMBD, N_FF), 0.5 / np.sqrt(N_FF))
        down[0, :] = 0.0
        prefix = f"model.layers.{layer}."
        weights.update({
            prefix + "input_layernorm.weight": np.ones(N_EMBD, np.float32),
            prefix + "post_attention_layernorm.weight": np.ones(N_EMBD, np.float32),
            prefix + "self_attn.q_proj.weight": normal((N_EMBD, N_EMBD), 1 / np.sqrt(N_EMBD)),
            prefix + "self_attn.k_proj.weight": normal((n_kv, N_EMBD), 1 / np.sqrt(N_EMBD)),
            prefix + "self_attn.v_proj.weight": normal((n_kv, N_EMBD), 1 / np.sqrt(N_EMBD)),
            prefix + "self_attn.o_proj.weight": o_proj,
            prefix + "mlp.gate_proj.weight": normal((N_FF, N_EMBD), 1 / np.sqrt(N_EMBD)),
            prefix + "mlp.up_proj.weight": normal((N_FF, N_EMBD), 1 / np.sqrt(N_EMBD)),
            prefix + "mlp.down_proj.weight": down,
        })
    state = {name: torch.from_numpy(array) for name, array in weights.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or [name for name in missing if "rotary" not in name]:
        raise RuntimeError(f"weights do not match the model: {missing=} {unexpected=}")
    model.save_pretrained(folder, safe_serialization=True)


def build(out: Path) -> None:
    """Build the fixture into out (replacing what is there)."""
    with tempfile.TemporaryDirectory(prefix="tiny-onnx-") as scratch:
        hf = Path(scratch) / "hf"
        hf.mkdir()
        vocab, merges = vocabulary()
        special = write_tokenizer(hf, vocab, merges)
        write_hf_model(hf, vocab, special)
        built = Path(scratch) / "onnx"
        subprocess.run(
            [sys.executable, "-m", "onnxruntime_genai.models.builder",
             "-i", str(hf), "-o", str(built), "-p", "fp32", "-e", "cpu",
             "-c", str(Path(scratch) / "cache")],
            check=True,
        )
        _fix_genai_config(built / "genai_config.json", special)
        out.mkdir(parents=True, exist_ok=True)
        for old in out.iterdir():
            if old.is_file() and old.name != "README.md":
                old.unlink()
        for name in ("genai_config.json", "model.onnx", "model.onnx.data"):
            shutil.copyfile(built / name, out / name)
        # The builder also saves the tokenizer through transformers, which rewrites it in
        # its own way (and adds chat_template.jinja); the fixture keeps the hand-written
        # files, so the template has one source: tokenizer_config.json.
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(hf / name, out / name)


def _fix_genai_config(path: Path, special: dict[str, int]) -> None:
    """The builder guesses bos_token_id 1 for a model without one; name the real one."""
    config = json.loads(path.read_text(encoding="utf-8"))
    config["model"]["bos_token_id"] = special["<|endoftext|>"]
    path.write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else DEFAULT_OUT
    build(out)
    for path in sorted(out.iterdir()):
        print(f"{path.name}\t{path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
