"""The ggml tensor types a GGUF file may use, and the bytes each block of one takes."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

_QK_K = 256
# ggml type id -> (name, elements per block, bytes per block), from gguf-py's
# GGML_QUANT_SIZES. Ids 4, 5 and 31-33, 36-38 belonged to formats ggml has dropped.
GGML_TYPES: Mapping[int, tuple[str, int, int]] = MappingProxyType({
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 2 + 16),
    3: ("Q4_1", 32, 2 + 2 + 16),
    6: ("Q5_0", 32, 2 + 4 + 16),
    7: ("Q5_1", 32, 2 + 2 + 4 + 16),
    8: ("Q8_0", 32, 2 + 32),
    9: ("Q8_1", 32, 4 + 4 + 32),
    10: ("Q2_K", 256, 2 + 2 + _QK_K // 16 + _QK_K // 4),
    11: ("Q3_K", 256, 2 + _QK_K // 4 + _QK_K // 8 + 12),
    12: ("Q4_K", 256, 2 + 2 + _QK_K // 2 + 12),
    13: ("Q5_K", 256, 2 + 2 + _QK_K // 2 + _QK_K // 8 + 12),
    14: ("Q6_K", 256, 2 + _QK_K // 2 + _QK_K // 4 + _QK_K // 16),
    15: ("Q8_K", 256, 4 + _QK_K + _QK_K // 8),
    16: ("IQ2_XXS", 256, 2 + _QK_K // 4),
    17: ("IQ2_XS", 256, 2 + _QK_K // 4 + _QK_K // 32),
    18: ("IQ3_XXS", 256, 2 + _QK_K // 4 + _QK_K // 8),
    19: ("IQ1_S", 256, 2 + _QK_K // 8 + _QK_K // 16),
    20: ("IQ4_NL", 32, 2 + 16),
    21: ("IQ3_S", 256, 2 + _QK_K // 4 + _QK_K // 8 + _QK_K // 32 + 4),
    22: ("IQ2_S", 256, 2 + _QK_K // 4 + _QK_K // 16),
    23: ("IQ4_XS", 256, 2 + 2 + _QK_K // 2 + _QK_K // 64),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, _QK_K // 8 + _QK_K // 16 + _QK_K // 32),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 2 + 4 * 13),
    35: ("TQ2_0", 256, 2 + 64),
    39: ("MXFP4", 32, 1 + 16),
    40: ("NVFP4", 64, 4 + 32),
    41: ("Q1_0", 128, 2 + 16),
})
