"""probe(): one HardwareReport from many small sources; any of them may fail alone.

A failed source leaves its field None (or empty) and adds an entry to report.errors that
says which source failed and why. The report itself never fails.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any, Callable, TypeVar

from app.hardware import sources_linux, sources_macos, sources_windows
from app.hardware.llama_source import llama_from
from app.hardware.machine import CommandFailed, CommandMissing, LiveMachine, Machine
from app.hardware.onnx_source import onnxruntime_from
from app.hardware.report import (
    CpuInfo, EpDevice, GpuInfo, HardwareReport, LlamaInfo, OnnxRuntimeInfo, PowerInfo, RamInfo, SourceError,
)
from app.hardware.sources_common import Problems, cpu_info, os_info, power_info, ram_info

_PLATFORM_SOURCES: dict[str, ModuleType] = {
    "Windows": sources_windows, "Linux": sources_linux, "Darwin": sources_macos,
}
# The order report.errors lists failures in, whatever order the threads finished in.
SOURCES = ("os", "cpu", "ram", "gpus", "npus", "onnxruntime", "windows_ml", "ep_devices", "llama", "power")

T = TypeVar("T")


def probe(machine: Machine | None = None, *, allow_downloads: bool = False) -> HardwareReport:
    """Look at the machine. Takes a second or two on Windows (PowerShell), less elsewhere.

    allow_downloads lets Windows ML fetch execution providers it offers but has not
    installed yet; without it nothing goes online.
    """
    machine = machine or LiveMachine()
    problems = Problems()
    os_ = _guarded("os", problems, os_info, machine)
    system = os_.system if os_ else ""
    module = _PLATFORM_SOURCES.get(system)
    # The command-based sources mostly wait on child processes, so they run side by side;
    # the Python-API sources (native libraries, COM on Windows) stay on this thread.
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="kestrel-probe") as pool:
        cpu = pool.submit(_guarded, "cpu", problems, _cpu, machine, module)
        gpus = pool.submit(_guarded, "gpus", problems, _platform_source, "gpus", machine, module, problems)
        npus = pool.submit(_guarded, "npus", problems, _platform_source, "npus", machine, module, problems)
        power = pool.submit(_guarded, "power", problems, _power, machine, module, problems)
        ram = _guarded("ram", problems, ram_info, machine)
        onnx = _guarded("onnxruntime", problems, _onnxruntime, machine, allow_downloads, problems)
        llama = _guarded("llama", problems, _llama, machine, problems)
        cpu_result, gpu_result, npu_result, power_result = cpu.result(), gpus.result(), npus.result(), power.result()
    ort_info, ep_devices = onnx if onnx else (None, ())
    return HardwareReport(
        os=os_, cpu=cpu_result, ram=ram,
        gpus=merge_gpu_facts(gpu_result or (), ep_devices, ram, system),
        npus=npu_result or (), ep_devices=ep_devices, onnxruntime=ort_info, llama=llama,
        power=power_result, errors=_ordered(problems.items()),
    )


def _guarded(source: str, problems: Problems, function: Callable[..., T], *args: Any) -> T | None:
    try:
        return function(*args)
    except (CommandMissing, CommandFailed, OSError, ImportError) as exc:
        problems.add(source, str(exc) or type(exc).__name__)
    except Exception as exc:  # a parser meeting output it did not expect: report it, keep going
        problems.add(source, f"{type(exc).__name__}: {exc}")
    return None


def _ordered(errors: tuple[SourceError, ...]) -> tuple[SourceError, ...]:
    rank = {name: index for index, name in enumerate(SOURCES)}
    return tuple(sorted(errors, key=lambda error: rank.get(error.source, len(rank))))


def _require(module: ModuleType | None, what: str, machine: Machine) -> ModuleType:
    if module is None:
        raise OSError(f"finding {what} is not supported on {machine.platform().get('system') or 'this system'}")
    return module


def _cpu(machine: Machine, module: ModuleType | None) -> CpuInfo:
    name, features = _require(module, "the CPU", machine).cpu_name_and_features(machine)
    return cpu_info(machine, name, features)


def _platform_source(what: str, machine: Machine, module: ModuleType | None, problems: Problems) -> Any:
    return getattr(_require(module, what, machine), what)(machine, problems)


def _power(machine: Machine, module: ModuleType | None, problems: Problems) -> PowerInfo:
    battery = machine.psutil_facts().get("battery")
    saver = None
    if module is not None and battery is not None:
        try:
            saver = module.battery_saver(machine)
        except Exception as exc:  # the battery state is still worth having without the saver
            problems.add("power", f"whether battery saver is on is not known: {exc}")
    return power_info(battery, saver)


def _onnxruntime(machine: Machine, allow_downloads: bool,
                 problems: Problems) -> tuple[OnnxRuntimeInfo, tuple[EpDevice, ...]]:
    facts = machine.onnxruntime(allow_downloads)
    info, devices = onnxruntime_from(facts)
    for failure in info.windows_ml.failed:
        problems.add("windows_ml", failure)
    if facts.get("ep_devices") is None:
        problems.add("ep_devices", f"onnxruntime {info.version} cannot list its devices "
                     "(get_ep_devices needs 1.22 or newer)")
    return info, devices


def _llama(machine: Machine, problems: Problems) -> LlamaInfo:
    info, trouble = llama_from(machine.llama())
    for message in trouble:
        problems.add("llama", message)
    return info


def merge_gpu_facts(gpus: tuple[GpuInfo, ...], ep_devices: tuple[EpDevice, ...], ram: RamInfo | None,
                    system: str) -> tuple[GpuInfo, ...]:
    """Fill in what one source knows better than another."""
    # DXCore, through ONNX Runtime, says for certain whether an adapter is integrated.
    discrete = {f"{d.vendor_id:04x}:{d.device_id:04x}": d.discrete
                for d in ep_devices if d.kind == "gpu" and d.discrete is not None}
    merged = []
    for gpu in gpus:
        if gpu.pci_id in discrete:
            gpu = dataclasses.replace(gpu, integrated=not discrete[gpu.pci_id])
        if system == "Windows" and ram is not None and gpu.shared_memory is None:
            # Windows lets every GPU borrow up to half of the RAM ("Shared GPU memory").
            gpu = dataclasses.replace(gpu, shared_memory=ram.total // 2)
        merged.append(gpu)
    return tuple(merged)
