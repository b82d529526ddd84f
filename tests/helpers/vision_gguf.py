"""A tiny vision model for tests: the tiny text GGUF and a tiny projector (mmproj) GGUF
that this llama.cpp's clip loader takes, with random weights.

The projector is a Gemma 3 style one (clip.projector_type "gemma3", the simplest that
clip.cpp builds: a SigLIP-style ViT, an average pool, an RMS norm and one projection).
It reads a 64x64 image in 8x8 patches (8x8 = 64 patches) and pools them 2x2, so every
image is IMAGE_TOKENS = 16 embeddings the size of the text model's. mtmd wraps a Gemma 3
image in "<start_of_image>" ... "<end_of_image>" text; the text model built here has both
as tokens of their own, so each image costs IMAGE_TOKENS + 2 prompt tokens.

The weights know nothing; the model answers nonsense about any picture. The point is the
path: the projector loads, an image is decoded, encoded and evaluated into the context.
Both files are written in well under a second.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from tests.helpers.tiny_gguf import build_tiny_gguf

IMAGE_SIZE = 64
PATCH_SIZE = 8
MERGE = 2
IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE // MERGE) ** 2  # 16
IMAGE_WRAP = ("<start_of_image>", "<end_of_image>")
TEXT_EMBD = 64


def build_vision_text_gguf(path: Path, *, n_embd: int = TEXT_EMBD, seed: int = 0) -> Path:
    """The tiny ChatML text model (tests/helpers/tiny_gguf.py), with Gemma 3's image tokens."""
    return build_tiny_gguf(path, n_embd=n_embd, seed=seed, name="kestrel-tiny-vision",
                           added_tokens=IMAGE_WRAP)


def build_mmproj_gguf(path: Path, *, projection_dim: int = TEXT_EMBD, n_embd: int = 32,
                      n_layers: int = 1, seed: int = 1, legacy: bool = False) -> Path:
    """A tiny Gemma 3 projector whose embeddings are projection_dim wide (the text model's
    n_embd for a matching pair; anything else for a projector made for another model).
    legacy: without general.type "mmproj", as older converters wrote projectors (their
    clip.vision.projection_dim meant something else, so Kestrel does not trust it)."""
    rng = np.random.default_rng(seed)
    n_head, n_ff = 4, 2 * n_embd
    n_patches = (IMAGE_SIZE // PATCH_SIZE) ** 2

    def normal(*shape: int, scale: float = 0.1) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    ones = np.ones(n_embd, dtype=np.float32)
    zeros = np.zeros(n_embd, dtype=np.float32)
    # numpy shapes are ggml's reversed: (out, in) for a matrix.
    tensors: dict[str, np.ndarray] = {
        "v.patch_embd.weight": normal(n_embd, 3, PATCH_SIZE, PATCH_SIZE).astype(np.float16),
        "v.patch_embd.bias": zeros.copy(),
        "v.position_embd.weight": normal(n_patches, n_embd),
    }
    for layer in range(n_layers):
        blk = f"v.blk.{layer}."
        for part in ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensors[blk + part + ".weight"] = normal(n_embd, n_embd, scale=1 / np.sqrt(n_embd))
            tensors[blk + part + ".bias"] = zeros.copy()
        for norm in ("ln1", "ln2"):
            tensors[blk + norm + ".weight"] = ones.copy()
            tensors[blk + norm + ".bias"] = zeros.copy()
        tensors[blk + "ffn_up.weight"] = normal(n_ff, n_embd, scale=1 / np.sqrt(n_embd))
        tensors[blk + "ffn_up.bias"] = np.zeros(n_ff, dtype=np.float32)
        tensors[blk + "ffn_down.weight"] = normal(n_embd, n_ff, scale=1 / np.sqrt(n_ff))
        tensors[blk + "ffn_down.bias"] = zeros.copy()
    tensors["v.post_ln.weight"] = ones.copy()
    tensors["v.post_ln.bias"] = zeros.copy()
    tensors["mm.soft_emb_norm.weight"] = ones.copy()
    tensors["mm.input_projection.weight"] = normal(n_embd, projection_dim, scale=1 / np.sqrt(n_embd))

    writer = GGUFWriter(path, "clip")
    writer.add_name("kestrel-tiny-mmproj")
    if not legacy:
        writer.add_string("general.type", "mmproj")
    writer.add_string("clip.projector_type", "gemma3")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_bool("clip.use_gelu", True)
    writer.add_uint32("clip.vision.embedding_length", n_embd)
    writer.add_uint32("clip.vision.feed_forward_length", n_ff)
    writer.add_uint32("clip.vision.block_count", n_layers)
    writer.add_uint32("clip.vision.projection_dim", projection_dim)
    writer.add_uint32("clip.vision.attention.head_count", n_head)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    writer.add_uint32("clip.vision.image_size", IMAGE_SIZE)
    writer.add_uint32("clip.vision.patch_size", PATCH_SIZE)
    writer.add_uint32("clip.vision.projector.scale_factor", MERGE)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    for name, array in tensors.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def build_vision_pair(folder: Path) -> tuple[Path, Path]:
    """The text model and its own projector, written into folder."""
    return (build_vision_text_gguf(folder / "tiny-vision.gguf"),
            build_mmproj_gguf(folder / "mmproj-tiny-vision.gguf"))


def png_bytes(width: int = 24, height: int = 16, seed: int = 0) -> bytes:
    """A small RGB PNG of random pixels, written with zlib and struct (no Pillow)."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    raw = b"".join(b"\x00" + pixels[row].tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


__all__ = ["IMAGE_TOKENS", "IMAGE_WRAP", "build_mmproj_gguf", "build_vision_pair",
           "build_vision_text_gguf", "png_bytes"]
