"""The engine's end of the llama.cpp backend: a GGUF model loaded where placement says."""

from __future__ import annotations

import llama_cpp

from app.engine.backends.backend import Backend, DeviceChoice
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.backends.loading import load_placed, model_facts, placements_for, with_gpu_layers
from app.engine.errors import ModelLoadError
from app.engine.failures import NoGpuBuild
from app.engine.protocol import Load
from app.hardware.placement import Placement
from app.hardware.report import HardwareReport


def open_gguf(request: Load, report: HardwareReport) -> Backend:
    """The model on the first placement that loads it (the GPU layers its settings ask for, if any)."""
    placements = placements_for(request, report, model_facts(request.model_path, request.context_length,
                                                             request.projector_path))
    if request.gpu_layers is not None:
        placements = with_gpu_layers(placements, request.gpu_layers)

    def load_on(placement: Placement, choice: DeviceChoice) -> Backend:
        if placement.gpu_layers != 0 and not llama_cpp.llama_supports_gpu_offload():
            # Asking this build for GPU layers would silently run on the CPU instead.
            raise ModelLoadError(NoGpuBuild())
        return GgufBackend.load(request, choice, gpu_layers=placement.gpu_layers)

    return load_placed(placements, load_on)
