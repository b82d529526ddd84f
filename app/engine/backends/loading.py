"""Load a model where placement says, falling back in order and keeping every reason."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import llama_cpp

from app.engine.backends.backend import Backend, DeviceChoice
from app.engine.errors import ModelLoadError
from app.engine.failures import DeviceRefused, FailedOn, NoDeviceWorked, NoGpuBuild, ProviderMissing
from app.engine.protocol import Load
from app.hardware.onnx_targets import genai_provider_key
from app.hardware.placement import ALL_LAYERS, ModelFacts, Placement, PlacementRefused, place
from app.hardware.report import HardwareReport
from app.library.fit_facts import facts_for


def model_facts(model_path: str, context_length: int, projector_path: str | None = None) -> ModelFacts:
    """The numbers placement needs, read from the file's header or the folder's config:
    the same ones the model manager's verdict uses (app/library/fit_facts.py), a vision
    projector's bytes counted with the weights."""
    return facts_for(Path(model_path), context_length, Path(projector_path) if projector_path else None)


def load_backend(request: Load, report: HardwareReport) -> Backend:
    """Try each placement in order; the loaded event says where it ran and what failed first.

    A file that is not usable (ModelFileError) fails at once: no device can fix it.
    """
    facts = model_facts(request.model_path, request.context_length, request.projector_path)
    try:
        placements = place(report, facts, request.device)
    except PlacementRefused as exc:
        raise ModelLoadError(DeviceRefused(exc.preference, exc.reason)) from exc
    if request.gpu_layers is not None and facts.format == "gguf":
        placements = with_gpu_layers(placements, request.gpu_layers)
    failures: list[str] = []
    attempts: list[FailedOn] = []
    last: ModelLoadError | None = None
    for placement in placements:
        choice = DeviceChoice(device_text(placement), placement.reason, tuple(failures))
        try:
            return _load_on(placement, choice, request, report)
        except ModelLoadError as exc:
            assert not isinstance(exc.failure, (NoDeviceWorked, DeviceRefused)), "one placement fails alone"
            failures.append(f"{placement.device_name}: {exc.message}")
            attempts.append(FailedOn(placement.device_name, exc.failure))
            last = exc
    assert last is not None, "placement always gives at least one placement"
    if len(attempts) == 1:
        raise last
    # The last failure (normally the CPU) is the one that decides what the user can do.
    raise ModelLoadError(NoDeviceWorked(tuple(attempts)))


def with_gpu_layers(placements: tuple[Placement, ...], layers: int) -> tuple[Placement, ...]:
    """The placements with the GPU layers set in the model's settings: 0 keeps the CPU
    only; a count (or -1, all) replaces what placement worked out for each GPU."""
    if layers == 0:
        return tuple(dataclasses.replace(p, reason=p.reason + "; the model's settings put no layers on the GPU")
                     for p in placements if p.kind == "cpu")
    words = "all layers" if layers == ALL_LAYERS else f"{layers} layers"
    return tuple(p if p.kind == "cpu" else
                 dataclasses.replace(p, gpu_layers=layers, reason=f"{p.reason}; {words} on the GPU, "
                                     "as the model's settings say")
                 for p in placements)


def device_text(placement: Placement) -> str:
    """What the status bar and each answer's stats say about where it runs."""
    runtime = " (ONNX Runtime)" if placement.backend == "onnxruntime" else ""
    if placement.kind == "cpu":
        return "CPU" + runtime
    text = f"{placement.kind.upper()}: {placement.device_name}{runtime}"
    if placement.backend == "llama.cpp" and placement.gpu_layers > 0:
        text += f" ({placement.gpu_layers} layers, the rest on the CPU)"
    return text


def _load_on(placement: Placement, choice: DeviceChoice, request: Load, report: HardwareReport) -> Backend:
    if placement.backend == "llama.cpp":
        # Imported here: loading a GGUF model must not pay for importing ONNX Runtime.
        from app.engine.backends.llama.gguf_backend import GgufBackend

        if placement.gpu_layers != 0 and not llama_cpp.llama_supports_gpu_offload():
            # Asking this build for GPU layers would silently run on the CPU instead.
            raise ModelLoadError(NoGpuBuild())
        return GgufBackend.load(request, choice, gpu_layers=placement.gpu_layers)
    from app.engine.backends.onnx.onnx_backend import PROVIDERS, OnnxBackend, register_plugin_providers

    if placement.kind != "cpu" and report.onnxruntime is not None:
        register_plugin_providers(report.onnxruntime.windows_ml.libraries)

    key = genai_provider_key(placement.provider or "CPUExecutionProvider").lower()
    key = next((k for k in PROVIDERS if k.lower() == key), key)
    if key not in PROVIDERS:
        raise ModelLoadError(ProviderMissing(str(placement.provider)))
    options = {"device_id": str(placement.device_id)} if placement.device_id is not None else {}
    return OnnxBackend.load(request, choice, execution_provider=key, provider_options=options)
