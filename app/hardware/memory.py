"""The memory a model needs where it runs: its weights, its KV cache, working buffers.

Pure arithmetic over numbers read from the model. Placement uses it to choose a device,
and the engine's backends use it again to check the memory that is free just before
they load: both must say the same.
"""

from __future__ import annotations

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
# them (memory-mapped weights end up resident all the same).
CPU_WORKSPACE = 256 * _MIB
CPU_WEIGHTS_SHARE = 1.05


def kv_cache_bytes(layers: int, context_length: int, kv_heads: int, head_size: int, element_bytes: int) -> int:
    """Bytes of the K and V caches for this many tokens; 0 when the shape is unknown."""
    if not (layers and kv_heads and head_size):
        return 0
    return 2 * layers * context_length * kv_heads * head_size * element_bytes


def gguf_kv_cache_bytes(layers: int, context_length: int, embedding_length: int, head_count: int,
                        head_count_kv: int | None = None) -> int:
    """llama.cpp's F16 cache from a GGUF header's numbers; 0 when the shape is unknown."""
    if not (head_count and embedding_length):
        return 0
    return kv_cache_bytes(layers, context_length, head_count_kv or head_count, embedding_length // head_count, F16)


def memory_needed(weights: int, kv_cache: int, *, on_cpu: bool) -> int:
    """All the bytes a model takes on one device: weights, KV cache and working buffers."""
    if on_cpu:
        return int(weights * CPU_WEIGHTS_SHARE) + kv_cache + CPU_WORKSPACE
    return weights + kv_cache + ACCELERATOR_OVERHEAD
