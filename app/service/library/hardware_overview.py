"""The hardware window's content: the machine, the model in use, where it runs and why."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.engine.protocol import Loaded
from app.hardware.report import HardwareReport, PowerInfo
from app.hardware.summary import format_report
from app.service.models.model_session import ModelSession


@dataclass(frozen=True)
class DeviceRow:
    """One graphics adapter or neural processor as the window lists it.

    runs_with: what can run a model on it here ("llama.cpp (CUDA)", "ONNX Runtime
    (DmlExecutionProvider)"), empty when nothing installed can use it.
    """

    kind: str  # "gpu" or "npu"
    name: str
    description: str  # "NVIDIA, discrete GPU"
    memory: str
    driver: str
    runs_with: tuple[str, ...]


@dataclass(frozen=True)
class HardwareOverview:
    """What the hardware window shows, taken at one moment.

    loaded is None when no model is loaded (then the placement fields are empty).
    text is the plain report for bug reports ("Copy report"), for a bug report.
    """

    report: HardwareReport
    loaded: Loaded | None
    model_name: str
    placement_reason: str
    fallback_reasons: tuple[str, ...]
    priority_problem: str | None
    threads: str
    text: str

    @property
    def devices(self) -> tuple[DeviceRow, ...]:
        return device_rows(self.report)


async def hardware_overview(session: ModelSession) -> HardwareOverview:
    """The report the engine makes of this machine, with the model session's state now."""
    report = await session.client.hardware_report()
    loaded = session.client.loaded
    threads = threads_text(session, loaded)
    return HardwareOverview(
        report=report, loaded=loaded, model_name=_model_name(session, loaded),
        placement_reason=loaded.placement_reason if loaded else "",
        fallback_reasons=tuple(loaded.fallback_reasons) if loaded else (),
        priority_problem=session.pace.problem or None, threads=threads,
        text=report_text(report, loaded, session.pace.problem, threads))


def report_text(report: HardwareReport, loaded: Loaded | None, priority_problem: str | None, threads: str) -> str:
    """The machine as a table, then where the model runs and why (the hardware window's Copy report)."""
    text = format_report(report)
    if loaded is not None:
        text += f"\n\nIn use: {loaded.device}\nWhy: {loaded.placement_reason}"
        for reason in loaded.fallback_reasons:
            text += f"\nCould not use {reason}"
        if priority_problem:
            text += f"\nPriority: {priority_problem}"
        text += f"\n{threads}"
    return text


def threads_text(session: ModelSession, loaded: Loaded | None) -> str:
    """How many CPU threads the last answer used and why, or the number loaded with."""
    choice = session.threads.last
    if choice is not None:
        return f"CPU threads for the last answer: {choice.threads} ({choice.reason})"
    return f"CPU threads: {loaded.threads}" if loaded is not None else ""


def device_rows(report: HardwareReport) -> tuple[DeviceRow, ...]:
    """The GPUs then the NPUs, each with the runtimes here that can use it."""
    rows = [DeviceRow("gpu", gpu.name, _gpu_kind(gpu.vendor, gpu.integrated),
                      _gpu_memory(gpu.dedicated_memory, gpu.shared_memory), gpu.driver or "",
                      _runs_with(report, gpu.name)) for gpu in report.gpus]
    rows += [DeviceRow("npu", npu.name, f"{npu.vendor}, NPU", "", npu.driver or "", _runs_with(report, npu.name))
             for npu in report.npus]
    return tuple(rows)


def _runs_with(report: HardwareReport, name: str) -> tuple[str, ...]:
    found: list[str] = []
    if report.llama is not None:
        found += [f"llama.cpp ({d.backend})" for d in report.llama.gpu_devices
                  if _same_device(name, d.description or d.name)]
    found += [f"ONNX Runtime ({provider_name(d.provider)})" for d in report.ep_devices
              if d.kind != "cpu" and _same_device(name, d.name)]
    return tuple(dict.fromkeys(found))


def provider_name(provider: str) -> str:
    """An ONNX Runtime execution provider as people know it: "DmlExecutionProvider" is DirectML."""
    short = provider.removesuffix("ExecutionProvider")
    return {"Dml": "DirectML", "CoreML": "Core ML"}.get(short, short)


def computer_rows(report: HardwareReport) -> list[tuple[str, str]]:
    """This computer as (name, value) rows: system, processor, cores, instruction sets, memory."""
    rows: list[tuple[str, str]] = []
    if report.os:
        rows.append(("System", f"{report.os.name} ({report.os.system} {report.os.version}, {report.os.machine})"))
    if report.cpu:
        cpu = report.cpu
        rows.append(("Processor", cpu.name))
        rows.append(("Cores", f"{cpu.cores or '?'} cores, {cpu.threads or '?'} threads ({cpu.architecture})"))
        rows.append(("Instruction sets", ", ".join(cpu.features) or "no AVX or NEON found"))
    if report.ram:
        rows.append(("Memory", f"{_gb(report.ram.total)}, {_gb(report.ram.available)} free"))
    return rows or [("System", "could not be read")]


def runtime_rows(report: HardwareReport) -> list[tuple[str, str]]:
    """llama.cpp and ONNX Runtime as (name, value) rows: versions, GPU offload, providers."""
    rows: list[tuple[str, str]] = []
    if report.llama:
        llama = report.llama
        offload = "yes" if llama.gpu_offload else "no, this build runs models on the CPU only"
        rows += [("llama.cpp", f"{llama.version}, for GGUF models"), ("GPU offload", offload),
                 ("Backends", ", ".join(llama.backends) or "none")]
    else:
        rows.append(("llama.cpp", "not found"))
    if report.onnxruntime:
        ort = report.onnxruntime
        rows += [("ONNX Runtime", f"{ort.version}, for ONNX models"),
                 ("Execution providers", ", ".join(provider_name(p) for p in ort.device_providers) or "none")]
        if ort.windows_ml.state != "not_windows":
            rows.append(("Windows ML", ort.windows_ml.message))
    else:
        rows.append(("ONNX Runtime", "not found"))
    return rows


def power_text(power: PowerInfo | None) -> str:
    """The power source in words; battery saver says what it changes."""
    if power is None:
        return "unknown"
    if not power.has_battery:
        text = "No battery: on mains power"
    else:
        text = {True: "On battery", False: "Plugged in", None: "Battery, power source unknown"}[power.on_battery]
        if power.battery_percent is not None:
            text += f", {power.battery_percent}%"
    if power.battery_saver:
        text += "; battery saver is on, so the most efficient device is preferred"
    return text


def _same_device(ours: str, theirs: str) -> bool:
    """Sources name one device a little differently ("Apple M2 Pro GPU", "Apple M2 Pro")."""
    a, b = ours.casefold().strip(), theirs.casefold().strip()
    return bool(a and b) and (a == b or a.startswith(b) or b.startswith(a))


def _gpu_kind(vendor: str, integrated: bool | None) -> str:
    kind = {True: "integrated GPU", False: "discrete GPU", None: "GPU"}[integrated]
    return f"{vendor}, {kind}"


def _gpu_memory(dedicated: int | None, shared: int | None) -> str:
    parts = [] if dedicated is None else [f"{_gb(dedicated)} own"]
    if shared is not None:
        parts.append(f"{_gb(shared)} shared")
    return ", ".join(parts) or "unknown"


def _gb(size: int) -> str:
    return f"{size / 1024**3:.1f} GB"


def _model_name(session: ModelSession, loaded: Loaded | None) -> str:
    """The library's title for the loaded model, or its file name."""
    if loaded is None:
        return ""
    model = session.model
    if model is not None and model.location == loaded.model_path:
        return str(model.title)
    return Path(loaded.model_path).name
