"""Linux sources: /proc/cpuinfo, /sys/class/drm, /sys/class/accel and nvidia-smi."""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.hardware.machine import Command, CommandMissing, Machine
from app.hardware.report import GpuInfo, NpuInfo, vendor_name
from app.hardware.sources_common import Problems

NVIDIA_SMI = Command(
    "nvidia_smi",
    ("nvidia-smi", "--query-gpu=name,memory.total,memory.used,driver_version", "--format=csv,noheader,nounits"),
    timeout_s=15.0,
)
_MIB = 1024**2
_GIB = 1024**3

# /proc/cpuinfo flag -> our feature name; x86 "flags" and ARM "Features" lines.
_CPUINFO_FEATURES = {
    "pni": "SSE3", "ssse3": "SSSE3", "sse4_1": "SSE4_1", "sse4_2": "SSE4_2", "avx": "AVX", "avx2": "AVX2",
    "fma": "FMA", "f16c": "F16C", "avx_vnni": "AVX_VNNI", "avx512f": "AVX512F",
    "avx512_vnni": "AVX512_VNNI", "avx512_bf16": "AVX512_BF16", "amx_int8": "AMX_INT8",
    "asimd": "NEON", "neon": "NEON", "asimdhp": "FP16", "asimddp": "DOTPROD", "i8mm": "MATMUL_INT8",
    "sve": "SVE", "sve2": "SVE2",
}
# Display drivers of virtual machines and firmware framebuffers: nothing to compute on.
_NOT_GPUS = {"simpledrm", "virtio_gpu", "virtio-pci", "bochs-drm", "bochs", "vmwgfx", "qxl", "cirrus",
             "cirrus-qemu", "efifb", "hyperv_drm"}
_NPU_NAMES = {
    "intel_vpu": "Intel NPU (AI Boost)", "amdxdna": "AMD NPU (Ryzen AI)", "qaic": "Qualcomm Cloud AI",
    "habanalabs": "Intel Gaudi", "ethosu": "Arm Ethos-U NPU", "rocket": "Rockchip NPU",
}


def cpu_name_and_features(machine: Machine) -> tuple[str, list[str]]:
    return parse_cpuinfo(machine.read_text("/proc/cpuinfo"))


def parse_cpuinfo(text: str) -> tuple[str, list[str]]:
    """The model name and known instruction sets of the first processor in /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    name = fields.get("model name") or fields.get("Model") or fields.get("Hardware") or "unknown"
    flags = (fields.get("flags") or fields.get("Features") or "").split()
    return name, [_CPUINFO_FEATURES[flag] for flag in flags if flag in _CPUINFO_FEATURES]


def battery_saver(machine: Machine) -> bool | None:
    """The ACPI platform profile says "low-power" while the desktop's power saver is on."""
    try:
        profile = machine.read_text("/sys/firmware/acpi/platform_profile").strip()
    except OSError:
        return None
    return profile in ("low-power", "quiet")


@dataclass(frozen=True)
class NvidiaGpu:
    """One line of nvidia-smi's CSV answer."""

    name: str
    memory_total: int
    memory_used: int
    driver: str


def parse_nvidia_smi(text: str) -> list[NvidiaGpu]:
    """`name, memory.total, memory.used, driver_version` lines, memory in MiB."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, total, used, driver = (part.strip() for part in line.rsplit(",", 3))
        gpus.append(NvidiaGpu(name, _mib(total), _mib(used), driver))
    return gpus


def _mib(text: str) -> int:
    # "[N/A]" where a field is not supported (some laptop GPUs report no used memory).
    return int(text) * _MIB if text.isdigit() else 0


def nvidia_gpus(machine: Machine, problems: Problems, source: str = "gpus") -> list[NvidiaGpu]:
    """nvidia-smi's GPUs; none when it is not installed, a problem when it fails."""
    try:
        return parse_nvidia_smi(machine.run(NVIDIA_SMI))
    except CommandMissing:
        return []
    except Exception as exc:  # a broken driver install makes nvidia-smi fail in many ways
        problems.add(source, f"nvidia-smi failed: {exc}")
        return []


def _uevent(machine: Machine, device: str) -> dict[str, str]:
    pairs = (line.partition("=") for line in machine.read_text(f"{device}/uevent").splitlines())
    return {key: value for key, _, value in pairs if key}


def _read_int(machine: Machine, path: str) -> int | None:
    try:
        return int(machine.read_text(path).strip())
    except (OSError, ValueError):
        return None


def gpus(machine: Machine, problems: Problems) -> tuple[GpuInfo, ...]:
    nvidia = nvidia_gpus(machine, problems)
    try:
        cards = [name for name in machine.list_dir("/sys/class/drm") if re.fullmatch(r"card\d+", name)]
    except FileNotFoundError:
        cards = []  # no display driver at all, or a container without /sys/class/drm
    found = [gpu for card in cards if (gpu := _drm_gpu(machine, f"/sys/class/drm/{card}/device", nvidia))]
    # NVIDIA cards nvidia-smi lists but the DRM folder does not show (containers).
    found += [_nvidia_only(gpu) for gpu in nvidia]
    return tuple(found)


def _drm_gpu(machine: Machine, device: str, nvidia: list[NvidiaGpu]) -> GpuInfo | None:
    event = _uevent(machine, device)
    driver = event.get("DRIVER", "")
    if driver in _NOT_GPUS or "PCI_ID" not in event:
        return None
    vendor_hex, _, device_hex = event["PCI_ID"].lower().partition(":")
    vendor_id, device_id = int(vendor_hex, 16), int(device_hex, 16)
    vendor = vendor_name(vendor_id)
    pci_id = f"{vendor_hex}:{device_hex}"
    if vendor_id == 0x10DE and nvidia:
        smi = nvidia.pop(0)
        return GpuInfo("NVIDIA", smi.name, smi.memory_total, free_memory=smi.memory_total - smi.memory_used,
                       driver=f"{driver} {smi.driver}", integrated=False, pci_id=pci_id)
    vram = _read_int(machine, f"{device}/mem_info_vram_total")
    used = _read_int(machine, f"{device}/mem_info_vram_used")
    # amdgpu's GTT is the system memory the GPU may map besides its own.
    gtt = _read_int(machine, f"{device}/mem_info_gtt_total")
    return GpuInfo(vendor, f"{vendor} GPU {pci_id}", vram, shared_memory=gtt,
                   free_memory=None if vram is None or used is None else vram - used, driver=driver or None,
                   integrated=_integrated(vendor_id, device_id, vram), pci_id=pci_id)


def _integrated(vendor_id: int, device_id: int, vram: int | None) -> bool | None:
    if vendor_id == 0x8086:
        # Intel's discrete Arc cards: Alchemist 0x56xx, Battlemage 0xe2xx; the rest are built in.
        return (device_id >> 8) not in (0x56, 0xE2)
    if vendor_id in (0x1002, 0x1022):
        # An APU's carve-out is small; a Radeon card has 4 GB or more.
        return None if vram is None else vram < 4 * _GIB
    return False if vendor_id == 0x10DE else None


def _nvidia_only(gpu: NvidiaGpu) -> GpuInfo:
    return GpuInfo("NVIDIA", gpu.name, gpu.memory_total, free_memory=gpu.memory_total - gpu.memory_used,
                   driver=gpu.driver, integrated=False)


def npus(machine: Machine, problems: Problems) -> tuple[NpuInfo, ...]:
    try:
        names = [name for name in machine.list_dir("/sys/class/accel") if re.fullmatch(r"accel\d+", name)]
    except FileNotFoundError:
        return ()  # a kernel without the accel subsystem, or no accelerator
    found = []
    for name in names:
        event = _uevent(machine, f"/sys/class/accel/{name}/device")
        driver = event.get("DRIVER", "")
        vendor_hex, _, device_hex = event.get("PCI_ID", "").lower().partition(":")
        vendor = vendor_name(int(vendor_hex, 16)) if vendor_hex else "unknown"
        found.append(NpuInfo(vendor, _NPU_NAMES.get(driver, f"{vendor} accelerator ({driver or name})"),
                             driver=driver or None, pci_id=f"{vendor_hex}:{device_hex}" if vendor_hex else None))
    return tuple(found)
