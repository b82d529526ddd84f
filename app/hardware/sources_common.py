"""Sources every operating system shares: the OS itself, CPU counts, RAM, battery."""

from __future__ import annotations

import threading
from typing import Any, Iterable

from app.hardware.machine import Machine
from app.hardware.onnx_source import windows_build
from app.hardware.report import CpuInfo, OsInfo, PowerInfo, RamInfo, SourceError

# The instruction sets that change which llama.cpp kernels run, in the order they are shown.
FEATURE_ORDER = (
    "SSE3", "SSSE3", "SSE4_1", "SSE4_2", "AVX", "AVX2", "FMA", "F16C", "AVX_VNNI", "AVX512F",
    "AVX512_VNNI", "AVX512_BF16", "AMX_INT8", "NEON", "FP16", "DOTPROD", "MATMUL_INT8", "SVE", "SVE2",
)
# Windows 11 kept the NT version 10.0; its builds start here.
_WINDOWS_11_FIRST_BUILD = 22000


class Problems:
    """Failures of sources that still returned something, collected from several threads."""

    def __init__(self) -> None:
        self._items: list[SourceError] = []
        self._lock = threading.Lock()

    def add(self, source: str, message: str) -> None:
        with self._lock:
            self._items.append(SourceError(source, message))

    def items(self) -> tuple[SourceError, ...]:
        with self._lock:
            return tuple(self._items)


def ordered_features(names: Iterable[str]) -> tuple[str, ...]:
    """Known instruction sets in FEATURE_ORDER, others dropped, no duplicates."""
    present = {name.upper() for name in names}
    return tuple(name for name in FEATURE_ORDER if name in present)


def os_info(machine: Machine) -> OsInfo:
    facts = machine.platform()
    system = facts["system"]
    if system == "Windows":
        build = windows_build(facts)
        name = "Windows 11" if build and build >= _WINDOWS_11_FIRST_BUILD else f"Windows {facts['release']}"
        return OsInfo(system, name, facts["version"], facts["machine"], build)
    if system == "Darwin":
        return OsInfo(system, f"macOS {facts.get('mac_version', '')}".strip(), facts["release"], facts["machine"])
    return OsInfo(system, _linux_name(machine) if system == "Linux" else system, facts["release"],
                  facts["machine"])


def _linux_name(machine: Machine) -> str:
    try:
        text = machine.read_text("/etc/os-release")
    except OSError:
        return "Linux"
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "PRETTY_NAME":
            return value.strip().strip('"') or "Linux"
    return "Linux"


def cpu_info(machine: Machine, name: str, features: Iterable[str]) -> CpuInfo:
    """The CPU from its OS-specific name and features, with counts from psutil."""
    facts = machine.psutil_facts()
    return CpuInfo(name=" ".join(name.split()) or "unknown", cores=facts.get("cpu_count_physical"),
                   threads=facts.get("cpu_count_logical"), architecture=machine.platform()["machine"],
                   features=ordered_features(features))


def ram_info(machine: Machine) -> RamInfo:
    facts = machine.psutil_facts()
    return RamInfo(total=int(facts["ram_total"]), available=int(facts["ram_available"]))


def power_info(battery: dict[str, Any] | None, battery_saver: bool | None) -> PowerInfo:
    """Battery from psutil's sensors_battery() as a dict, saver from the OS."""
    if battery is None:
        return PowerInfo(has_battery=False, on_battery=False, battery_saver=battery_saver)
    plugged = battery.get("power_plugged")
    percent = battery.get("percent")
    return PowerInfo(has_battery=True, on_battery=None if plugged is None else not plugged,
                     battery_percent=None if percent is None else round(percent), battery_saver=battery_saver)

