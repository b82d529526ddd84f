"""The memory a model needs where it runs: its weights, its KV cache, working buffers.

Pure arithmetic over numbers read from the model. Placement uses it to choose a device,
and the engine's backends use it again to check the memory that is free just before
they load: both must say the same.

Where the model's shape is known (ModelShape), the working buffers follow what llama.cpp
and ONNX Runtime really allocate (measured by benchmarks/fit_accuracy.py); where it is
not, flat allowances stand in for them.
"""

from __future__ import annotations

from dataclasses import dataclass

_MIB = 1024**2

# Bytes per element of a KV cache. llama.cpp keeps F16 unless told otherwise. An ONNX
# model's cache has the type of its graph's past_key_values inputs, which the export
# chose (ONNX Runtime GenAI's model builder: float32 for CPU and int4-on-CPU exports,
# float16 for GPU ones); the engine reads it from the model file where it can.
F16 = 2
F32 = 4
# When an ONNX graph's cache type cannot be read: float32, the larger of the two common
# types, so that a model is never said to fit when it does not.
ONNX_KV_FALLBACK = F32

# Compute buffers and the runtime's own context on a GPU or NPU (a CUDA context alone
# is a few hundred MB).
ACCELERATOR_OVERHEAD = 512 * _MIB
# Compute buffers on the CPU, and 5 % of the weights for what the loader keeps beside
# them (memory-mapped weights end up resident all the same; llama.cpp also repacks
# some tensors into a copy of their own).
CPU_WORKSPACE = 256 * _MIB
CPU_WEIGHTS_SHARE = 1.05

# llama-cpp-python's n_batch and n_ubatch, which the engine keeps: llama.cpp sizes its
# compute buffer for a batch of this many tokens.
LLAMA_UBATCH = 512
# llama.cpp's vocabulary tables (token texts, scores, the lookup maps), per token: 48 MB
# for Gemma 3's 262,144 tokens, measured.
VOCAB_TABLE_BYTES = 192
# ONNX Runtime's session, its arena and GenAI's generator on the CPU: what the engine
# process grew by with the tiny test model, less its weights, cache and logits.
ONNX_CPU_SESSION = 36 * _MIB


@dataclass(frozen=True)
class ModelShape:
    """The numbers that size a model's working buffers; 0 where the model does not say."""

    embedding_length: int = 0
    head_count: int = 0
    vocab_size: int = 0
    feed_forward_length: int = 0

    @property
    def known(self) -> bool:
        return bool(self.head_count and self.vocab_size)


def kv_cache_bytes(layers: int, context_length: int, kv_heads: int, head_size: int, element_bytes: int) -> int:
    """Bytes of the K and V caches for this many tokens; 0 when the shape is unknown."""
    if not (layers and kv_heads and head_size):
        return 0
    return 2 * layers * context_length * kv_heads * head_size * element_bytes


def gguf_kv_cache_bytes(layers: int, context_length: int, embedding_length: int, head_count: int,
                        head_count_kv: int | None = None) -> int:
    """llama.cpp's F16 cache from a GGUF header's numbers; 0 when the shape is unknown.

    This takes the head size as embedding / heads; app.library.fit_facts reads the
    header's key_length and value_length, which some models (Gemma 3) set apart.
    """
    if not (head_count and embedding_length):
        return 0
    return kv_cache_bytes(layers, context_length, head_count_kv or head_count, embedding_length // head_count, F16)


def llama_compute_bytes(shape: ModelShape, context_length: int, *, on_cpu: bool) -> int:
    """llama.cpp's working memory beside weights and cache, as its graph reserve sizes it.

    On a GPU the whole compute buffer is allocated up front: the largest of the attention
    scores of a batch (KQ and the mask: batch x context x (heads + 1) floats), the logits
    of a batch (batch x vocabulary floats) and the feed-forward activations. On the CPU
    the same buffer is only reserved; what becomes resident is what the engine touches,
    and it asks for the logits of one token only: the attention scores and their softmax
    at a full context, the vocabulary tables and one token's logits.
    """
    batch, context = LLAMA_UBATCH, context_length
    if on_cpu:
        attention = batch * context * (2 * shape.head_count + 1) * F32
        return attention + shape.vocab_size * (VOCAB_TABLE_BYTES + F32)
    attention = batch * context * (shape.head_count + 1) * F32
    logits = batch * shape.vocab_size * F32
    feed_forward = 3 * batch * shape.feed_forward_length * F32
    return max(attention, logits, feed_forward) + 2 * batch * shape.embedding_length * F32


def onnx_compute_bytes(shape: ModelShape, context_length: int, *, on_cpu: bool) -> int:
    """ONNX Runtime GenAI's working memory: the session, and a prompt's logits and activations.

    The model builder's graphs give logits for every prompt token, so a prompt that fills
    the context holds context x vocabulary floats.
    """
    prompt = context_length * (shape.vocab_size + 4 * shape.embedding_length) * F32
    return prompt + (ONNX_CPU_SESSION if on_cpu else ACCELERATOR_OVERHEAD)


def memory_needed(weights: int, kv_cache: int, *, on_cpu: bool, compute: int | None = None) -> int:
    """All the bytes a model takes on one device: weights, KV cache and working buffers.

    compute: the working buffers where the model's shape is known; None for the flat
    allowances.
    """
    if on_cpu:
        workspace = CPU_WORKSPACE if compute is None else compute
        return int(weights * CPU_WEIGHTS_SHARE) + kv_cache + workspace
    return weights + kv_cache + (ACCELERATOR_OVERHEAD if compute is None else compute)
