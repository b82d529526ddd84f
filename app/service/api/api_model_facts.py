"""What a model's file says of it, for APIs that describe models (Ollama's /api/tags and /api/show).

Read from the GGUF header off the event loop, once per file (its path, size and time added
name it): a header with a 150,000-token vocabulary takes a noticeable part of a second to read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from app.library.installed import InstalledModel
from app.library.model_details import gguf_details
from app.library.model_files.gguf_info import ModelFileError, read_gguf_info

# Files read at most: a library rarely holds more, and a stale entry costs only one more read.
_KEPT = 256


@dataclass(frozen=True)
class ModelFacts:
    """What the file states; None where it does not (an ONNX folder states little of this).

    architecture: general.architecture ("llama", "qwen2"). parameters: the count of weights.
    size_label: general.size_label ("0.5B"). quantization: "Q4_K_M". capabilities: Kestrel's
    words ("tools", "reasoning", "embedding", "vision"). template: the chat template's text.
    numbers: the architecture's numbers keyed as the GGUF names them ("qwen2.context_length").
    """

    architecture: str | None = None
    parameters: int | None = None
    size_label: str | None = None
    quantization: str | None = None
    capabilities: tuple[str, ...] = ()
    template: str | None = None
    license: str | None = None
    numbers: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


_read: dict[tuple[str, int, float], ModelFacts] = {}


def model_facts(model: InstalledModel) -> ModelFacts:
    """The model's facts (blocking: call it on a worker thread); empty ones for a file that cannot be read."""
    key = (str(model.path), model.size, model.added)
    found = _read.get(key)
    if found is None:
        found = _facts(model)
        if len(_read) >= _KEPT:
            _read.clear()
        _read[key] = found
    return found


def _facts(model: InstalledModel) -> ModelFacts:
    vision = ("vision",) if model.vision else ()
    if str(model.format) != "gguf":
        return ModelFacts(capabilities=vision)
    try:
        info = read_gguf_info(model.path)
    except (ModelFileError, OSError):  # moved or damaged since it was added: describe what the library knows
        return ModelFacts(capabilities=vision)
    details: dict[str, Any] = gguf_details(info)
    arch = info.architecture
    numbers = {f"{arch}.{name}": value for name, value in (
        ("context_length", info.context_length), ("block_count", info.block_count),
        ("embedding_length", info.embedding_length), ("attention.head_count", info.head_count),
        ("attention.head_count_kv", info.head_count_kv)) if value}
    return ModelFacts(architecture=arch, parameters=info.parameter_count or None,
                      size_label=details["parameters_label"], quantization=details["quantization"],
                      capabilities=(*vision, *details["capabilities"]), template=info.chat_template,
                      license=details["license"], numbers=MappingProxyType(numbers))
