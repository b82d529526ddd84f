"""How many threads to use and whether a model fits in the memory that is free."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import psutil

from app.hardware.placement_types import kv_cache_bytes_for

if TYPE_CHECKING:
    from app.library.gguf_info import GgufInfo

_GIB = 1024**3


def default_threads() -> int:
    """The machine's physical cores: hyper-threads only slow llama.cpp's decoding."""
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def kv_cache_bytes(info: "GgufInfo", context_length: int) -> int:
    """Bytes of an F16 KV cache for this many tokens, from the model's shape."""
    return kv_cache_bytes_for(info.block_count or 0, context_length, info.embedding_length or 0,
                              info.head_count or 0, info.head_count_kv)


def memory_needed(file_size: int, context_length: int, info: "GgufInfo") -> int:
    """Weights (memory-mapped, but they end up resident) + KV cache + working space."""
    return int(file_size * 1.05) + kv_cache_bytes(info, context_length) + 256 * 1024**2


def memory_problem(file_size: int, context_length: int, info: "GgufInfo",
                   available: int | None = None) -> str | None:
    """A plain message when the model will not fit in the memory that is free now."""
    needed = memory_needed(file_size, context_length, info)
    available = psutil.virtual_memory().available if available is None else available
    if needed <= available:
        return None
    return (
        f"{info.path.name} needs about {needed / _GIB:.1f} GB of memory with a context of "
        f"{context_length} tokens, and {available / _GIB:.1f} GB is free. Close other "
        "programs, lower the context length, or choose a smaller model."
    )
