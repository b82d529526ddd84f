"""Where a model should run: report + model facts + preference -> Placements, best first.

A pure function. Auto prefers an NPU the ONNX model was built for, then a GPU the whole
model fits in, then a partial GPU offload of at least a third of the layers, then the
CPU, which is always last. When the machine is saving power (on battery, or battery
saver on) Auto leaves discrete GPUs out: NPU, then integrated GPU, then CPU.

A forced choice (npu, gpu, cpu) returns only placements of that kind, or raises
PlacementRefused saying why it cannot work: it never falls back on its own.
"""

from __future__ import annotations

import dataclasses

from app.core.settings import DevicePreference
from app.hardware.onnx_targets import OnnxTarget, provider_name
from app.hardware.placement_fit import (
    Candidate, gb, gguf_gpu_candidate, gpu_backends, llama_gpu_budgets, margin, onnx_budget, ram_note,
)
from app.hardware.placement_types import ALL_LAYERS, ModelFacts, Placement, PlacementRefused, Runtime
from app.hardware.report import EpDevice, HardwareReport, PowerInfo

__all__ = [
    "ALL_LAYERS", "DevicePreference", "ModelFacts", "OnnxTarget", "Placement", "PlacementRefused", "Runtime", "place",
]


def place(report: HardwareReport, model: ModelFacts, preference: DevicePreference = DevicePreference.AUTO,
          power: PowerInfo | None = None) -> tuple[Placement, ...]:
    """Placements to try in order. power overrides report.power (it changes more often)."""
    try:
        preference = DevicePreference(preference)
    except ValueError:
        raise ValueError(f"unknown device preference {preference!r}") from None
    power = power if power is not None else report.power
    saving = power is not None and power.saving_power
    if model.format == "gguf":
        return _place_gguf(report, model, preference, saving)
    if model.format == "onnx":
        return _place_onnx(report, model, preference, saving)
    raise ValueError(f"unknown model format {model.format!r}")


# --- GGUF through llama.cpp ---------------------------------------------------------


def _place_gguf(report: HardwareReport, model: ModelFacts, preference: DevicePreference,
                saving: bool) -> tuple[Placement, ...]:
    cpu_bytes = model.memory_needed(on_cpu=True)
    if preference == DevicePreference.CPU:
        return (_gguf_cpu(report, "chosen in settings" + ram_note(report, cpu_bytes), cpu_bytes),)
    if preference == DevicePreference.NPU:
        raise PlacementRefused(preference, "llama.cpp cannot run a GGUF model on an NPU. Choose Auto, GPU or CPU, "
                                      "or an ONNX model made for this NPU.")
    candidates = [gguf_gpu_candidate(model, gpu) for gpu in llama_gpu_budgets(report)]
    if preference == DevicePreference.GPU:
        usable = sorted((c for c in candidates if c.usable), key=_gguf_rank)
        if not usable:
            raise PlacementRefused(preference, _refused_gguf_gpu(report, candidates))
        return tuple(c.placement for c in usable)
    chosen, why = _auto_gguf(report, candidates, saving)
    return chosen + (_gguf_cpu(report, why + ram_note(report, cpu_bytes), cpu_bytes),)


def _auto_gguf(report: HardwareReport, candidates: list[Candidate],
               saving: bool) -> tuple[tuple[Placement, ...], str]:
    """The GPU placements Auto tries, and the words the CPU placement after them carries."""
    chosen: list[Candidate] = []
    notes: list[str] = []
    for candidate in candidates:
        if saving and not candidate.integrated and candidate.usable:
            notes.append(f"on battery, {candidate.placement.device_name} is left out to save power")
        elif candidate.usable and (candidate.whole or candidate.helps):
            chosen.append(candidate)
        else:
            notes.append(candidate.skip_note)
    chosen.sort(key=_gguf_rank)
    if chosen:
        why = "the fall-back if the GPU cannot load the model" + "".join(f"; {n}" for n in notes)
    else:
        why = "; ".join(notes) if notes else _no_gguf_gpu(report)
    return tuple(c.placement for c in chosen), why


def _gguf_rank(candidate: Candidate) -> tuple[bool, bool, int, int]:
    # Whole models first, discrete GPUs before integrated ones, then more layers, more memory.
    placement = candidate.placement
    layers = 1 << 30 if placement.gpu_layers == ALL_LAYERS else placement.gpu_layers
    return (not candidate.whole, candidate.integrated, -layers, -placement.memory_needed)


def _no_gguf_gpu(report: HardwareReport) -> str:
    llama = report.llama
    if llama is None:
        return "llama.cpp could not be checked, so no GPU is known to work (see the report's errors)"
    backends = gpu_backends(llama)
    if not backends:
        return "no GPU that llama.cpp can use (this build has no GPU backend)"
    return f"no GPU that llama.cpp can use (its {', '.join(backends)} backend found no device)"


def _refused_gguf_gpu(report: HardwareReport, candidates: list[Candidate]) -> str:
    if candidates:
        return ("You chose the GPU, but " + "; ".join(c.skip_note for c in candidates) + ". Close programs that "
                "use the GPU, choose a smaller model or a shorter context, or choose Auto or CPU.")
    advice = "Choose Auto or CPU."
    if report.llama is not None and not gpu_backends(report.llama):
        advice = "Install a llama.cpp build with CUDA, Vulkan or Metal, or choose Auto or CPU."
    elif report.llama is not None:
        advice = "Check the graphics driver, or choose Auto or CPU."
    return f"You chose the GPU, but there is {_no_gguf_gpu(report)}. {advice}"


def _gguf_cpu(report: HardwareReport, why: str, needed: int) -> Placement:
    name = report.cpu.name if report.cpu else "CPU"
    return Placement(kind="cpu", device_name=name, backend=Runtime.LLAMA_CPP, memory_needed=needed,
                     reason=f"CPU: {why}", gpu_layers=0)


# --- ONNX through ONNX Runtime ------------------------------------------------------


def _place_onnx(report: HardwareReport, model: ModelFacts, preference: DevicePreference,
                saving: bool) -> tuple[Placement, ...]:
    targets = tuple(OnnxTarget(provider_name(t.provider), t.kind) for t in model.onnx_targets)
    candidates = [c for index, device in enumerate(report.ep_devices)
                  if (c := _onnx_candidate(report, targets, index, device, model)) is not None]
    needed = model.memory_needed(on_cpu=True)
    cpu = next((c.placement for c in candidates if c.placement.kind == "cpu"), None) or _onnx_cpu(report, needed)
    if preference == DevicePreference.CPU:
        return (dataclasses.replace(cpu, reason="CPU: chosen in settings" + ram_note(report, needed)),)
    if preference in (DevicePreference.NPU, DevicePreference.GPU):
        usable = [c.placement for c in sorted(candidates, key=lambda c: c.integrated)
                  if c.placement.kind == preference.value and c.usable]
        if not usable:
            raise PlacementRefused(preference, _no_onnx_device(report, targets, candidates, preference))
        return tuple(usable)
    chosen, why = _auto_onnx(report, targets, candidates, saving)
    cpu = dataclasses.replace(cpu, reason=f"CPU: {why}" + ram_note(report, needed))
    return chosen + (cpu,)


def _auto_onnx(report: HardwareReport, targets: tuple[OnnxTarget, ...], candidates: list[Candidate],
               saving: bool) -> tuple[tuple[Placement, ...], str]:
    """NPUs, then GPUs (integrated only when saving power); and the CPU placement's words."""
    chosen: list[Placement] = []
    notes: list[str] = []
    for kind in ("npu", "gpu"):
        for candidate in sorted((c for c in candidates if c.placement.kind == kind), key=lambda c: c.integrated):
            if not candidate.usable:
                notes.append(candidate.skip_note)
            elif saving and kind == "gpu" and not candidate.integrated:
                notes.append(f"on battery, {candidate.placement.device_name} is left out to save power")
            else:
                chosen.append(candidate.placement)
    if not chosen and not notes:
        notes.append("the model was built for the CPU only" if not targets else
                     f"ONNX Runtime has no device here for {_built_for(targets)}, which the model was built for"
                     + _unoffered_npus(report, targets))
    why = "; ".join((["the fall-back"] if chosen else []) + notes)
    return tuple(chosen), why


def _onnx_candidate(report: HardwareReport, targets: tuple[OnnxTarget, ...], index: int, device: EpDevice,
                    model: ModelFacts) -> Candidate | None:
    if device.kind == "cpu":
        if device.provider != "CPUExecutionProvider":
            return None
    elif not any(t.provider == device.provider and t.kind in (None, device.kind) for t in targets):
        return None
    needed = model.memory_needed(on_cpu=device.kind == "cpu")
    budget, shared = onnx_budget(report, device)
    name = report.cpu.name if device.kind == "cpu" and report.cpu else device.name
    fits = budget is None or needed + margin(budget) <= budget
    if budget is None:
        reason = f"{name} through {device.provider}: built for it; its free memory is not known"
    else:
        memory = "system memory" if shared else "memory"
        reason = f"{name} through {device.provider}: the model needs {gb(needed)}, {gb(budget)} of {memory} free"
    placement = Placement(
        kind=device.kind, device_name=name, backend=Runtime.ONNX_RUNTIME, memory_needed=needed,
        reason=reason, provider=device.provider, ep_device_index=index,
        device_id=device.adapter_index if device.provider == "DmlExecutionProvider" else None,
    )
    note = f"{name} has {gb(budget or 0)} free and the model needs {gb(needed)}"
    return Candidate(placement, shared, fits, fits, fits, "" if fits else note)


def _onnx_cpu(report: HardwareReport, needed: int) -> Placement:
    name = report.cpu.name if report.cpu else "CPU"
    return Placement(kind="cpu", device_name=name, backend=Runtime.ONNX_RUNTIME, memory_needed=needed,
                     reason="CPU", provider="CPUExecutionProvider")


def _built_for(targets: tuple[OnnxTarget, ...]) -> str:
    if not targets:
        return "the CPU only"
    return ", ".join(t.provider + (f" ({t.kind.upper()})" if t.kind else "") for t in targets)


def _no_onnx_device(report: HardwareReport, targets: tuple[OnnxTarget, ...], candidates: list[Candidate],
                    kind: str) -> str:
    label = kind.upper()
    too_small = [c.skip_note for c in candidates if c.placement.kind == kind and not c.usable]
    if too_small:
        return f"You chose the {label}, but " + "; ".join(too_small) + ". Choose Auto, or a smaller model."
    wanted = [t for t in targets if t.kind in (None, kind)]
    if not wanted:
        article = "an" if label[0] in "AEFHILMNORSX" else "a"  # letters said with a vowel sound
        return (f"You chose the {label}, but this model was built for {_built_for(targets)}, not for {article} {label}. "
                f"Choose Auto, or a model made for this {label}.")
    ml = report.onnxruntime.windows_ml if report.onnxruntime else None
    extra = f" {ml.message}" if ml is not None and ml.state not in ("registered", "not_windows") else ""
    return (f"You chose the {label}, but ONNX Runtime has no {label} device for {_built_for(tuple(wanted))} on "
            f"this PC{_unoffered_npus(report, tuple(wanted))}.{extra} Choose Auto or CPU.")


def _unoffered_npus(report: HardwareReport, targets: tuple[OnnxTarget, ...]) -> str:
    """Words for an NPU the system lists but no provider offers (an old driver, a missing provider)."""
    if not report.npus or not any(t.kind == "npu" for t in targets) or any(d.kind == "npu" for d in report.ep_devices):
        return ""
    names = ", ".join(npu.name for npu in report.npus)
    one = len(report.npus) == 1
    return (f"; the system lists {names}, but no ONNX Runtime provider offers {'it' if one else 'them'} "
            "(the NPU driver or its provider may be missing or too old)")
