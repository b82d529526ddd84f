"""What a model takes to load: threads, its context, the memory it needs and whether that is free.

The ModelFacts made here feed placement (which device) and then the backend's own
check of the memory free just before it loads, so both count the same bytes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import psutil

from app.engine.onnx_graph import kv_element_bytes
from app.hardware.memory import gguf_kv_cache_bytes, kv_cache_bytes
from app.hardware.onnx_targets import OnnxTarget
from app.hardware.placement_types import ModelFacts

if TYPE_CHECKING:
    from app.library.gguf_info import GgufInfo
    from app.library.model_format import OnnxFolderInfo

_GIB = 1024**3
MIN_CONTEXT = 256


def default_threads() -> int:
    """The machine's physical cores: hyper-threads only slow llama.cpp's decoding."""
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def usable_context(requested: int, trained: int | None) -> int:
    """The context to load: as asked, at least MIN_CONTEXT tokens, never more than the
    model was made for (past that it only produces nonsense)."""
    context = max(MIN_CONTEXT, requested)
    return min(context, trained) if trained else context


def gguf_facts(info: "GgufInfo", requested_context: int) -> ModelFacts:
    """A GGUF file's numbers at the context it will load with; llama.cpp keeps an F16 cache."""
    context = usable_context(requested_context, info.context_length)
    layers = info.block_count or 0
    kv = gguf_kv_cache_bytes(layers, context, info.embedding_length or 0, info.head_count or 0,
                             info.head_count_kv)
    return ModelFacts("gguf", info.file_size, context, kv, layers)


def onnx_facts(info: "OnnxFolderInfo", requested_context: int,
               targets: tuple[OnnxTarget, ...] = ()) -> ModelFacts:
    """An ONNX folder's numbers at the context it will load with, its cache in its graph's type."""
    context = usable_context(requested_context, info.context_length)
    layers = info.num_layers or 0
    kv = kv_cache_bytes(layers, context, info.num_kv_heads or 0, info.head_size or 0, kv_element_bytes(info))
    return ModelFacts("onnx", info.weights_bytes, context, kv, layers, targets)


def memory_problem(name: str, facts: ModelFacts, available: int | None = None) -> str | None:
    """A plain message when the model will not fit in the memory that is free now for the CPU."""
    needed = facts.memory_needed(on_cpu=True)
    available = psutil.virtual_memory().available if available is None else available
    if needed <= available:
        return None
    return (
        f"{name} needs about {needed / _GIB:.1f} GB of memory with a context of "
        f"{facts.context_length} tokens, and {available / _GIB:.1f} GB is free. Close other "
        "programs, lower the context length, or choose a smaller model."
    )
