"""The numbers "will it fit?" needs, read from a GGUF header or an ONNX folder's genai_config.json.

Nothing is loaded: the GGUF header and the JSON config say the model's shape, and the
shape says how big its KV cache and working buffers get at a context length.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from app.hardware.fit import FitFacts
from app.hardware.memory import F16, ONNX_KV_FALLBACK, ModelShape
from app.hardware.onnx_targets import targets_from_genai_config
from app.library.catalog import CatalogEntry
from app.library.model_files.gguf_header import GgufSkipped
from app.library.model_files.gguf_info import GgufInfo, read_gguf_info
from app.library.model_files.onnx_graph import kv_element_bytes
from app.library.model_files.model_format import GENAI_CONFIG, OnnxFolderInfo, detect_format, read_onnx_folder

# The shortest context the engine loads with (app.engine.backends.resources.MIN_CONTEXT).
MIN_CONTEXT = 256
# A split GGUF's shards: "name-00001-of-00003.gguf".
_SHARD = re.compile(r"^(?P<stem>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


def facts_for(path: Path, context_length: int, projector: Path | None = None) -> FitFacts:
    """The model's numbers at the context it would load with; ModelFileError if it is not a model.

    The engine checks memory and places the model with these same numbers, so the
    verdict and the load agree. A vision projector (InstalledModel.projector) is loaded
    beside the weights, so its bytes count as weights too.
    """
    path = Path(path)
    if detect_format(path) == "gguf":
        return with_projector(gguf_fit_facts(read_gguf_info(path), context_length), projector)
    folder = read_onnx_folder(path)
    return onnx_fit_facts(folder, context_length, kv_element_bytes(folder))


def with_projector(facts: FitFacts, projector: Path | None) -> FitFacts:
    """facts with the projector file's bytes added to the weights (none when it is not there)."""
    try:
        extra = projector.stat().st_size if projector is not None else 0
    except OSError:
        extra = 0
    if not extra:
        return facts
    return dataclasses.replace(facts, file_size=facts.file_size + extra,
                               projector_bytes=facts.projector_bytes + extra)


def facts_for_catalog(entry: CatalogEntry, context_length: int) -> FitFacts | None:
    """A catalog model's numbers before its files are here: its size, and the shape the
    catalog gives (layers, KV heads, head size), counted as the engine would load it.

    Sliding-window layers get the full context, as the engine loads with swa_full. An
    ONNX cache counts as float32, the larger type, until the graph can be read. None
    when the catalog does not know the size (the server says it once a download starts).
    """
    if entry.size is None:
        return None
    context = loaded_context(context_length, entry.context_length)
    shape = entry.shape
    projector = entry.projector.size if entry.projector is not None and entry.projector.size else 0
    if shape is None:
        return FitFacts(entry.format, entry.size, context, 0, trained_context=entry.context_length,
                        projector_bytes=projector)
    element = F16 if entry.format == "gguf" else ONNX_KV_FALLBACK
    per_token = 2 * shape.layers * shape.kv_heads * shape.head_size * element
    # Without a count of query heads, embedding / head size is that count for most of the
    # catalog's models (Gemma 3's, 1152 / 256, rounds down to its 4); gpt-oss states its own.
    heads = shape.head_count or (shape.embedding_length or 0) // shape.head_size
    model_shape = ModelShape(embedding_length=shape.embedding_length or 0, head_count=heads,
                             vocab_size=shape.vocab_size or 0)
    return FitFacts(entry.format, entry.size, context, per_token * context, shape.layers, shape=model_shape,
                    trained_context=entry.context_length, kv_element_bytes=element, projector_bytes=projector)


def loaded_context(requested: int, trained: int | None) -> int:
    """The context the engine loads with: as asked, at least MIN_CONTEXT, at most the trained one."""
    context = max(MIN_CONTEXT, requested)
    return min(context, trained) if trained else context


def gguf_fit_facts(info: GgufInfo, context_length: int) -> FitFacts:
    """llama.cpp's view of a GGUF: an F16 cache for every layer at the full context.

    Sliding-window layers (Gemma 3: five of every six) could keep a cache of the window
    only, but the engine loads with swa_full so that a later turn can reuse the earlier
    ones, and llama.cpp then gives them the full context too.
    """
    meta, arch = info.metadata, info.architecture
    context = loaded_context(context_length, info.context_length)
    layers = info.block_count or 0
    per_token = _gguf_kv_per_token(info)
    shape = ModelShape(
        embedding_length=info.embedding_length or 0,
        head_count=info.head_count or 0,
        vocab_size=_int(meta.get(f"{arch}.vocab_size")) or _vocab_length(meta.get("tokenizer.ggml.tokens")),
        feed_forward_length=_int(meta.get(f"{arch}.feed_forward_length")),
    )
    weights = _weights_bytes(info)
    # A split GGUF's first shard lists only its own tensors: the read is then judged by the bytes.
    read = info.read_per_token if weights == info.file_size else {}
    return FitFacts("gguf", weights, context, per_token * context, layers, shape=shape,
                    trained_context=info.context_length, kv_element_bytes=F16, read_per_token=read)


def _gguf_kv_per_token(info: GgufInfo) -> int:
    """Bytes of K and V per token over all layers, as llama.cpp sizes them (F16)."""
    meta, arch = info.metadata, info.architecture
    layers, heads = info.block_count or 0, info.head_count or 0
    if not (layers and heads and info.embedding_length):
        return 0
    # Gemma 3 and others state head sizes apart from embedding / heads; llama.cpp uses them.
    key = _int(meta.get(f"{arch}.attention.key_length")) or info.embedding_length // heads
    value = _int(meta.get(f"{arch}.attention.value_length")) or key
    kv_heads = meta.get(f"{arch}.attention.head_count_kv")
    if isinstance(kv_heads, tuple) and len(kv_heads) == layers and all(type(h) is int for h in kv_heads):
        head_total = sum(kv_heads)  # a per-layer list: layers without attention keep no cache
    else:
        head_total = layers * (info.head_count_kv or heads)
    return head_total * (key + value) * F16


def _weights_bytes(info: GgufInfo) -> int:
    """The file's size, or all its shards' for a split GGUF (path is the first shard)."""
    match = _SHARD.match(info.path.name)
    if match is None:
        return info.file_size
    count = int(match["count"])
    shards = [info.path.with_name(f"{match['stem']}-{i:05d}-of-{match['count']}.gguf") for i in range(1, count + 1)]
    return sum(s.stat().st_size for s in shards if s.is_file()) or info.file_size


def onnx_fit_facts(info: OnnxFolderInfo, context_length: int, element_bytes: int = ONNX_KV_FALLBACK) -> FitFacts:
    """ONNX Runtime GenAI's view: a cache of the graph's type, logits for the whole prompt."""
    config = _genai_config(info.path)
    decoder = config.get("model", {}).get("decoder", {}) if isinstance(config.get("model"), dict) else {}
    context = loaded_context(context_length, info.context_length)
    layers = info.num_layers or 0
    per_token = 2 * layers * (info.num_kv_heads or 0) * (info.head_size or 0) * element_bytes
    shape = ModelShape(
        embedding_length=_int(decoder.get("hidden_size")),
        head_count=_int(decoder.get("num_attention_heads")) or (info.num_kv_heads or 0),
        vocab_size=info.vocab_size or 0,
    )
    return FitFacts("onnx", info.weights_bytes, context, per_token * context, layers,
                    targets_from_genai_config(config), shape=shape,
                    trained_context=info.context_length, kv_element_bytes=element_bytes)


def _genai_config(folder: Path) -> dict[str, Any]:
    try:
        config = json.loads((folder / GENAI_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def _vocab_length(tokens: object) -> int:
    if isinstance(tokens, GgufSkipped):
        return tokens.length
    return len(tokens) if isinstance(tokens, tuple) else 0


def _int(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    # A per-layer list (feed-forward sizes of some models): the largest sizes the buffers.
    if isinstance(value, tuple) and value and all(type(v) is int for v in value):
        return max(value)
    return 0
