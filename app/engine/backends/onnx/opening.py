"""The engine's end of the ONNX Runtime GenAI backend: a model folder loaded where placement says."""

from __future__ import annotations

from app.engine.backends.backend import Backend, DeviceChoice
from app.engine.backends.loading import load_placed, model_facts, placements_for
from app.engine.backends.onnx.onnx_backend import PROVIDERS, OnnxBackend, register_plugin_providers
from app.engine.errors import ModelLoadError
from app.engine.failures import ProviderMissing
from app.engine.protocol import Load
from app.hardware.onnx_targets import genai_provider_key
from app.hardware.placement import Placement
from app.hardware.report import HardwareReport


def open_onnx(request: Load, report: HardwareReport) -> Backend:
    """The model on the first placement whose execution provider loads it."""
    placements = placements_for(request, report, model_facts(request.model_path, request.context_length,
                                                             request.projector_path))

    def load_on(placement: Placement, choice: DeviceChoice) -> Backend:
        if placement.kind != "cpu" and report.onnxruntime is not None:
            register_plugin_providers(report.onnxruntime.windows_ml.libraries)
        key = genai_provider_key(placement.provider or "CPUExecutionProvider").lower()
        key = next((k for k in PROVIDERS if k.lower() == key), key)
        if key not in PROVIDERS:
            raise ModelLoadError(ProviderMissing(str(placement.provider)))
        options = {"device_id": str(placement.device_id)} if placement.device_id is not None else {}
        return OnnxBackend.load(request, choice, execution_provider=key, provider_options=options)

    return load_placed(placements, load_on)
