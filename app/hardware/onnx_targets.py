"""Which execution providers and devices an ONNX model folder was built for (genai_config.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from app.hardware.report import DeviceKind

# onnxruntime-genai's short provider names (and other spellings) -> ONNX Runtime's EP names.
_PROVIDERS = {
    "cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "dml": "DmlExecutionProvider",
    "directml": "DmlExecutionProvider", "qnn": "QNNExecutionProvider", "openvino": "OpenVINOExecutionProvider",
    "vitisai": "VitisAIExecutionProvider", "webgpu": "WebGpuExecutionProvider",
    "nvtensorrtrtx": "NvTensorRTRTXExecutionProvider", "tensorrt": "TensorrtExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider", "coreml": "CoreMLExecutionProvider", "rocm": "ROCMExecutionProvider",
}
# Providers that drive one kind of device whatever their options say.
_PROVIDER_KINDS: dict[str, DeviceKind] = {
    "CPUExecutionProvider": "cpu", "CUDAExecutionProvider": "gpu", "DmlExecutionProvider": "gpu",
    "VitisAIExecutionProvider": "npu", "WebGpuExecutionProvider": "gpu", "NvTensorRTRTXExecutionProvider": "gpu",
    "TensorrtExecutionProvider": "gpu", "MIGraphXExecutionProvider": "gpu", "ROCMExecutionProvider": "gpu",
}
# QNN picks its device by backend library.
_QNN_BACKENDS: dict[str, DeviceKind] = {"qnnhtp": "npu", "qnngpu": "gpu", "qnncpu": "cpu"}


@dataclass(frozen=True)
class OnnxTarget:
    """A provider the model was built for, and the kind of device, where the model says."""

    provider: str
    kind: DeviceKind | None = None


def provider_name(alias: str) -> str:
    """ONNX Runtime's name for a provider: "dml" and "DmlExecutionProvider" both give the latter."""
    key = alias.lower().replace("executionprovider", "").replace("_", "").replace("-", "")
    return _PROVIDERS.get(key, alias)


def genai_provider_key(provider: str) -> str:
    """onnxruntime-genai's short name for a provider: "DmlExecutionProvider" gives "dml"."""
    full = provider_name(provider)
    return next((key for key, name in _PROVIDERS.items() if name == full), provider)


def targets_from_genai_config(config: Mapping[str, Any]) -> tuple[OnnxTarget, ...]:
    """The targets in model.decoder.session_options.provider_options; none means CPU only."""
    decoder = (config.get("model") or {}).get("decoder") or {}
    options = (decoder.get("session_options") or {}).get("provider_options") or []
    targets: list[OnnxTarget] = []
    for entry in options:
        for alias, settings in (entry or {}).items():
            provider = provider_name(str(alias))
            target = OnnxTarget(provider, _kind(provider, settings if isinstance(settings, Mapping) else {}))
            if target not in targets:
                targets.append(target)
    return tuple(targets)


def _kind(provider: str, settings: Mapping[str, Any]) -> DeviceKind | None:
    if provider == "QNNExecutionProvider":
        backend = str(settings.get("backend_path") or settings.get("backend_type") or "htp").lower()
        stem = backend.rsplit("/", 1)[-1].rsplit("\\", 1)[-1].split(".")[0]
        return _QNN_BACKENDS.get(stem if stem.startswith("qnn") else f"qnn{stem}", "npu")
    if provider == "OpenVINOExecutionProvider":
        # "NPU", "GPU.0", "HETERO:NPU,CPU": the first device named is the one that leads.
        device = str(settings.get("device_type") or "CPU").split(":")[-1].split(",")[0].split(".")[0]
        kind = device.strip().lower()
        return kind if kind in ("cpu", "gpu", "npu") else None  # type: ignore[return-value]
    return _PROVIDER_KINDS.get(provider)
