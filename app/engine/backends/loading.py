"""Load a model on this machine where placement says, falling back in order and keeping every reason.

What the local backends share (llama/ and onnx/ open their model through it): placement's ordered
list for the model's facts, each placement tried with the backend's own loader, and every failure
kept for the user. A backend that runs nowhere on this machine (a remote server) needs none of it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from app.engine.backends.backend import Backend, DeviceChoice
from app.engine.errors import ModelLoadError
from app.engine.failures import DeviceRefused, FailedOn, NoBackend, NoDeviceWorked, ServerFailed
from app.engine.protocol import Load
from app.hardware.placement import ALL_LAYERS, ModelFacts, Placement, PlacementRefused, Runtime, place
from app.hardware.report import HardwareReport
from app.library.fit_facts import facts_for

# One placement tried: the backend's model on it, or ModelLoadError saying why not.
LoadOn = Callable[[Placement, DeviceChoice], Backend]


def model_facts(model_path: str, context_length: int, projector_path: str | None = None) -> ModelFacts:
    """The numbers placement needs, read from the file's header or the folder's config:
    the same ones the model manager's verdict uses (app/library/fit_facts.py), a vision
    projector's bytes counted with the weights."""
    return facts_for(Path(model_path), context_length, Path(projector_path) if projector_path else None)


def placements_for(request: Load, report: HardwareReport, facts: ModelFacts) -> tuple[Placement, ...]:
    """Where placement says the model may run, best first; ModelLoadError(DeviceRefused) when the
    device the user chose cannot run it."""
    try:
        return place(report, facts, request.device)
    except PlacementRefused as exc:
        raise ModelLoadError(DeviceRefused(exc.preference, exc.reason)) from exc


def load_placed(placements: tuple[Placement, ...], load_on: LoadOn) -> Backend:
    """Try each placement in order; the loaded event says where it ran and what failed first.

    A file that is not usable (ModelFileError) fails at once: no device can fix it.
    """
    failures: list[str] = []
    attempts: list[FailedOn] = []
    last: ModelLoadError | None = None
    for placement in placements:
        choice = DeviceChoice(device_text(placement), placement.reason, tuple(failures))
        try:
            return load_on(placement, choice)
        except ModelLoadError as exc:
            assert not isinstance(exc.failure, (NoDeviceWorked, DeviceRefused, NoBackend, ServerFailed)), \
                "one placement fails alone"
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
    runtime = " (ONNX Runtime)" if placement.backend == Runtime.ONNX_RUNTIME else ""
    if placement.kind == "cpu":
        return "CPU" + runtime
    text = f"{placement.kind.upper()}: {placement.device_name}{runtime}"
    if placement.backend == Runtime.LLAMA_CPP and placement.gpu_layers > 0:
        text += f" ({placement.gpu_layers} layers, the rest on the CPU)"
    return text
