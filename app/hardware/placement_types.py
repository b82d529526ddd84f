"""The values placement takes and gives: ModelFacts in, Placements out, PlacementRefused when it cannot."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from app.core.settings import DevicePreference
from app.hardware.memory import memory_needed
from app.hardware.onnx_targets import OnnxTarget
from app.hardware.report import DeviceKind

ModelFormat = Literal["gguf", "onnx"]


class Runtime(StrEnum):
    """What runs a model on a device placement chose: a GGUF file runs on llama.cpp, an ONNX folder on
    ONNX Runtime (GenAI); each engine backend loads the placements of its own runtime."""

    LLAMA_CPP = "llama.cpp"
    ONNX_RUNTIME = "onnxruntime"

# llama.cpp's n_gpu_layers for "every layer, and the output layer too".
ALL_LAYERS = -1


@dataclass(frozen=True)
class ModelFacts:
    """What placement needs to know about a model: numbers, never files.

    file_size is the weights' bytes; layers is the GGUF block count (0 when unknown);
    kv_cache_bytes is the cache for context_length tokens (app.hardware.memory computes
    it from the model's shape and cache type).
    onnx_targets are the providers an ONNX folder was built for (onnx_targets module);
    none means a CPU model.
    """

    format: ModelFormat
    file_size: int
    context_length: int
    kv_cache_bytes: int
    layers: int = 0
    onnx_targets: tuple[OnnxTarget, ...] = ()

    def memory_needed(self, *, on_cpu: bool) -> int:
        """All of the model on one device: on the CPU, or on a GPU or NPU."""
        return memory_needed(self.file_size, self.kv_cache_bytes, on_cpu=on_cpu)


@dataclass(frozen=True)
class Placement:
    """One place to run a model, with the memory it needs there and why it was chosen.

    For llama.cpp, gpu_layers is n_gpu_layers: 0 for the CPU, -1 (ALL_LAYERS) for all.
    For ONNX Runtime, provider is the execution provider, ep_device_index the device's
    position in report.ep_devices (onnxruntime.get_ep_devices() order), and device_id
    the provider's own device_id option where it has one (DirectML's adapter number).
    """

    kind: DeviceKind
    device_name: str
    backend: Runtime
    memory_needed: int
    reason: str
    gpu_layers: int = 0
    provider: str | None = None
    device_id: int | None = None
    ep_device_index: int | None = None


class PlacementRefused(Exception):
    """A device the user chose (NPU, GPU or CPU) cannot run this model; str() says why and what to do.

    Placement raises this instead of quietly running somewhere else.
    """

    def __init__(self, preference: DevicePreference, reason: str) -> None:
        super().__init__(reason)
        self.preference = preference
        self.reason = reason
