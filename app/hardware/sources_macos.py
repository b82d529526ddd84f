"""macOS sources: sysctl and pmset. Apple silicon has one memory for CPU, GPU and Neural Engine."""

from __future__ import annotations

from app.hardware.machine import Command, Machine
from app.hardware.report import GpuInfo, NpuInfo
from app.hardware.sources_common import Problems

# Absolute paths: an app started from Finder gets a short PATH.
SYSCTL = Command("sysctl", ("/usr/sbin/sysctl", "hw", "machdep.cpu"), timeout_s=10.0)
PMSET = Command("pmset", ("/usr/bin/pmset", "-g"), timeout_s=10.0)

_SYSCTL_FEATURES = {
    "hw.optional.sse3": "SSE3", "hw.optional.supplementalsse3": "SSSE3", "hw.optional.sse4_1": "SSE4_1",
    "hw.optional.sse4_2": "SSE4_2", "hw.optional.avx1_0": "AVX", "hw.optional.avx2_0": "AVX2",
    "hw.optional.fma": "FMA", "hw.optional.avx512f": "AVX512F", "hw.optional.AdvSIMD": "NEON",
    "hw.optional.neon": "NEON", "hw.optional.arm.FEAT_FP16": "FP16", "hw.optional.neon_fp16": "FP16",
    "hw.optional.arm.FEAT_DotProd": "DOTPROD", "hw.optional.arm.FEAT_I8MM": "MATMUL_INT8",
}


def parse_sysctl(text: str) -> dict[str, str]:
    """`name: value` lines into a dict."""
    values = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            values[name.strip()] = value.strip()
    return values


def _sysctl(machine: Machine) -> dict[str, str]:
    return parse_sysctl(machine.run(SYSCTL))


def cpu_name_and_features(machine: Machine) -> tuple[str, list[str]]:
    values = _sysctl(machine)
    features = [feature for name, feature in _SYSCTL_FEATURES.items() if values.get(name) == "1"]
    if "F16C" in values.get("machdep.cpu.features", "").split():
        features.append("F16C")
    return values.get("machdep.cpu.brand_string", "unknown"), features


def _apple_silicon(values: dict[str, str]) -> bool:
    return values.get("hw.optional.arm64") == "1"


def gpus(machine: Machine, problems: Problems) -> tuple[GpuInfo, ...]:
    values = _sysctl(machine)
    if not _apple_silicon(values):
        return ()  # Intel Macs: their GPUs are not a target for Kestrel
    chip = values.get("machdep.cpu.brand_string", "Apple silicon")
    memory = int(values["hw.memsize"]) if values.get("hw.memsize", "").isdigit() else None
    # Unified memory: the GPU has no memory of its own and may use most of the RAM.
    return (GpuInfo("Apple", f"{chip} GPU", dedicated_memory=None, shared_memory=memory, integrated=True),)


def npus(machine: Machine, problems: Problems) -> tuple[NpuInfo, ...]:
    if not _apple_silicon(_sysctl(machine)):
        return ()
    return (NpuInfo("Apple", "Apple Neural Engine"),)


def battery_saver(machine: Machine) -> bool | None:
    """pmset -g lists `lowpowermode 1` while Low Power Mode is on."""
    for line in machine.run(PMSET).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "lowpowermode":
            return parts[1] == "1"
    return None
