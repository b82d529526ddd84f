"""The hardware report as a table for people: the doctor command and the hardware panel."""

from __future__ import annotations

from app.hardware.report import GpuInfo, HardwareReport, LlamaInfo, PowerInfo

_GIB = 1024**3
_LABEL_WIDTH = 14


def format_report(report: HardwareReport) -> str:
    """The report as a two-column table for people."""
    rows: list[tuple[str, str]] = []
    if report.os:
        rows.append(("System", f"{report.os.name} ({report.os.system} {report.os.version}, {report.os.machine})"))
    if report.cpu:
        cpu = report.cpu
        features = ", ".join(cpu.features) or "no AVX or NEON found"
        rows.append(("CPU", f"{cpu.name}: {cpu.cores} cores, {cpu.threads} threads; {features}"))
    if report.ram:
        rows.append(("RAM", f"{_gb(report.ram.total)} total, {_gb(report.ram.available)} free"))
    rows += _list_rows("GPUs", [_gpu_text(gpu) for gpu in report.gpus])
    rows += _list_rows("NPUs", [f"{npu.name} ({npu.vendor})" + (f", driver {npu.driver}" if npu.driver else "")
                                for npu in report.npus])
    if report.onnxruntime:
        ort = report.onnxruntime
        rows.append(("ONNX Runtime", f"{ort.version}; providers {', '.join(ort.device_providers) or 'none'}"))
        rows.append(("Windows ML", ort.windows_ml.message))
    cpu_name = report.cpu.name if report.cpu else None
    # ONNX Runtime names a CPU by its vendor alone outside Windows.
    rows += _list_rows("EP devices", [f"{d.kind.upper():3}  {cpu_name if d.kind == 'cpu' and cpu_name else d.name}"
                                      f"  ({d.provider})" for d in report.ep_devices])
    if report.llama:
        rows.append(("llama.cpp", _llama_text(report.llama)))
        rows += _list_rows("  devices", [f"{d.kind.upper():4} {d.description or d.name} ({d.backend}), "
                                         f"{_gb(d.memory_free)} free of {_gb(d.memory_total)}"
                                         for d in report.llama.gpu_devices], empty=None)
    if report.power:
        rows.append(("Power", _power_text(report.power)))
    rows += _list_rows("Problems", [f"{e.source}: {e.message}" for e in report.errors], empty="none")
    lines = ["Kestrel doctor: what this machine has for running models", ""]
    lines += [f"{label:<{_LABEL_WIDTH}}{text}" for label, text in rows]
    return "\n".join(lines)


def _list_rows(label: str, items: list[str], empty: str | None = "none found") -> list[tuple[str, str]]:
    if not items:
        return [(label, empty)] if empty is not None else []
    return [(label if index == 0 else "", item) for index, item in enumerate(items)]


def _gb(size: int | None) -> str:
    return "?" if size is None else f"{size / _GIB:.1f} GB"


def _gpu_text(gpu: GpuInfo) -> str:
    kind = {True: "integrated", False: "discrete", None: "type unknown"}[gpu.integrated]
    if gpu.dedicated_memory is None:
        memory = ["no memory of its own"]
    else:
        memory = [f"{_gb(gpu.dedicated_memory)} dedicated"]
    if gpu.free_memory is not None:
        memory.append(f"{_gb(gpu.free_memory)} free")
    if gpu.shared_memory is not None:
        memory.append(f"{_gb(gpu.shared_memory)} shared")
    driver = f"; driver {gpu.driver}" if gpu.driver else ""
    return f"{gpu.name} ({gpu.vendor}, {kind}): {', '.join(memory)}{driver}"


def _llama_text(llama: LlamaInfo) -> str:
    offload = "yes" if llama.gpu_offload else "no"
    return f"{llama.version}; GPU offload {offload}; backends {', '.join(llama.backends) or 'none'}"


def _power_text(power: PowerInfo) -> str:
    if not power.has_battery:
        text = "no battery (mains power)"
    else:
        source = {True: "on battery", False: "plugged in", None: "power source unknown"}[power.on_battery]
        percent = f", {power.battery_percent}%" if power.battery_percent is not None else ""
        text = f"{source}{percent}"
    if power.battery_saver:
        text += "; battery saver on"
    return text
