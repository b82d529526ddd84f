"""Windows sources: WMI through PowerShell, the display-class registry key, PnP NPUs, nvidia-smi.

Each command's JSON answer is parsed by a pure function, so tests feed the parsers what
Windows PowerShell 5.1 prints (including its single-object and \\u0026 quirks).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from app.hardware.machine import Machine, powershell
from app.hardware.report import GpuInfo, NpuInfo, vendor_name
from app.hardware.sources_common import Problems
from app.hardware.sources_linux import NvidiaGpu, nvidia_gpus

DISPLAY_CLASS_KEY = r"HKLM:\SYSTEM\CurrentControlSet\Control\Class\{4d36e968-e325-11ce-bfc1-08002be10318}"

PROCESSOR = powershell("win32_processor", "ConvertTo-Json -InputObject @(Get-CimInstance -ClassName "
                       "Win32_Processor | Select-Object Name, Manufacturer, NumberOfCores, NumberOfLogicalProcessors)")
VIDEO_CONTROLLERS = powershell("win32_videocontroller", "ConvertTo-Json -InputObject @(Get-CimInstance -ClassName "
                               "Win32_VideoController | Select-Object Name, AdapterCompatibility, AdapterRAM, "
                               "DriverVersion, PNPDeviceID, VideoProcessor, Status)")
# Adapters are the numbered subkeys (0000, 0001...); "Properties" beside them is
# access-denied to a normal user, hence the 0* pattern.
DISPLAY_REGISTRY = powershell("display_class_registry", "ConvertTo-Json -InputObject @(Get-ItemProperty -Path "
                              f"'{DISPLAY_CLASS_KEY}\\0*' -ErrorAction SilentlyContinue | Select-Object "
                              "PSChildName, DriverDesc, DriverVersion, MatchingDeviceId, "
                              "'HardwareInformation.qwMemorySize', 'HardwareInformation.MemorySize')")
# Windows 11 puts NPUs in the "Neural processors" class (ComputeAccelerator); older AMD
# and Intel drivers filed them under System devices, hence the names. ' NPU' has its
# space so that "INPUT" does not match.
COMPUTE_ACCELERATORS = powershell("compute_accelerators", "ConvertTo-Json -InputObject @(Get-CimInstance -ClassName "
                                  "Win32_PnPEntity -Filter \"PNPClass = 'ComputeAccelerator' OR Name LIKE '% NPU%' "
                                  "OR Name LIKE 'NPU %' OR Name LIKE '%AI Boost%' OR Name LIKE '%IPU Device%'\" | "
                                  "Select-Object Name, Manufacturer, PNPClass, PNPDeviceID, Status)")

# Win32_VideoController.AdapterRAM is a uint32: 4 GB and more reads as about 4 GB.
ADAPTER_RAM_CAP = 0xFFFFFFFF
# Adapters that draw no pixels of their own: remote sessions, mirror drivers, fallbacks.
_SOFTWARE_ADAPTER_PREFIXES = ("ROOT\\", "SWD\\", "USB\\")


def parse_json_list(text: str) -> list[dict[str, Any]]:
    """PowerShell's ConvertTo-Json answer as a list: one object, an array, or nothing."""
    text = text.strip().lstrip("\ufeff")
    if not text:
        return []
    data = json.loads(text)
    return [data] if isinstance(data, dict) else [item for item in data if isinstance(item, dict)]


def cpu_name_and_features(machine: Machine) -> tuple[str, list[str]]:
    processors = parse_json_list(machine.run(PROCESSOR))
    name = str(processors[0].get("Name") or "unknown") if processors else "unknown"
    features = machine.windows_processor_features()
    return name, [feature for feature, present in features.items() if present]


@dataclass(frozen=True)
class AdapterMemory:
    """One numbered subkey of the display class key."""

    description: str
    matching_device_id: str
    memory: int | None


def parse_display_registry(text: str) -> list[AdapterMemory]:
    adapters = []
    for item in parse_json_list(text):
        memory = _registry_number(item.get("HardwareInformation.qwMemorySize"))
        if memory is None:
            memory = _registry_number(item.get("HardwareInformation.MemorySize"))
        adapters.append(AdapterMemory(str(item.get("DriverDesc") or ""),
                                      str(item.get("MatchingDeviceId") or "").lower(), memory))
    return adapters


def _registry_number(value: Any) -> int | None:
    # REG_QWORD/REG_DWORD arrive as numbers; REG_BINARY as a list of bytes, little-endian.
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list) and value and all(isinstance(b, int) for b in value):
        return int.from_bytes(bytes(value), "little")
    return None


def _pci_ids(pnp_id: str) -> tuple[int | None, int | None]:
    vendor = re.search(r"VEN_([0-9A-F]{4})", pnp_id, re.IGNORECASE)
    device = re.search(r"DEV_([0-9A-F]{4})", pnp_id, re.IGNORECASE)
    return (int(vendor.group(1), 16) if vendor else None, int(device.group(1), 16) if device else None)


def _vendor(pnp_id: str, fallback: str) -> tuple[str, str | None]:
    if "QCOM" in pnp_id.upper():
        return "Qualcomm", None  # Snapdragon parts are ACPI devices without PCI ids
    vendor_id, device_id = _pci_ids(pnp_id)
    pci_id = f"{vendor_id:04x}:{device_id:04x}" if vendor_id is not None and device_id is not None else None
    return vendor_name(vendor_id, fallback.replace(" Corporation", "").strip()), pci_id


def gpus(machine: Machine, problems: Problems) -> tuple[GpuInfo, ...]:
    controllers = parse_json_list(machine.run(VIDEO_CONTROLLERS))
    try:
        memory = parse_display_registry(machine.run(DISPLAY_REGISTRY))
    except Exception as exc:  # the adapters are still worth reporting with WMI's capped memory
        problems.add("gpus", f"the display registry could not be read, so memory above 4 GB is "
                     f"not known: {exc}")
        memory = []
    nvidia = nvidia_gpus(machine, problems)
    return tuple(gpu for item in controllers if (gpu := _gpu(item, memory, nvidia)) is not None)


def _gpu(item: dict[str, Any], registry: list[AdapterMemory], nvidia: list[NvidiaGpu]) -> GpuInfo | None:
    pnp_id = str(item.get("PNPDeviceID") or "")
    name = " ".join(str(item.get("Name") or "").split())
    if not name or pnp_id.upper().startswith(_SOFTWARE_ADAPTER_PREFIXES):
        return None
    vendor, pci_id = _vendor(pnp_id, str(item.get("AdapterCompatibility") or ""))
    dedicated = _registry_memory(pnp_id, name, registry)
    if dedicated is None:
        dedicated = item.get("AdapterRAM") if isinstance(item.get("AdapterRAM"), int) else None
    driver = str(item.get("DriverVersion") or "") or None
    free = None
    smi = None
    if vendor == "NVIDIA" and nvidia:
        smi = next((gpu for gpu in nvidia if gpu.name == name), nvidia[0])
    if smi is not None:
        nvidia.remove(smi)
        dedicated, free = smi.memory_total, smi.memory_total - smi.memory_used
        driver = f"{smi.driver} ({driver})" if driver else smi.driver
    return GpuInfo(vendor, name, dedicated, free_memory=free, driver=driver,
                   integrated=_integrated(vendor, name, dedicated), pci_id=pci_id)


def _registry_memory(pnp_id: str, name: str, registry: list[AdapterMemory]) -> int | None:
    pnp = pnp_id.lower()
    for adapter in registry:
        if adapter.matching_device_id and pnp.startswith(adapter.matching_device_id) and adapter.memory:
            return adapter.memory
    for adapter in registry:
        if adapter.description == name and adapter.memory:
            return adapter.memory
    return None


def _integrated(vendor: str, name: str, dedicated: int | None) -> bool | None:
    """A first guess; the probe replaces it with DXCore's answer when ONNX Runtime has one."""
    if vendor in ("Qualcomm", "Apple"):
        return True
    if vendor == "NVIDIA":
        return False
    if vendor == "Intel":
        return dedicated is None or dedicated <= 2 * 1024**3
    if vendor == "AMD":
        return re.search(r"\bRX\b|\bPRO W|Instinct", name) is None
    return None


def npus(machine: Machine, problems: Problems) -> tuple[NpuInfo, ...]:
    found = []
    for item in parse_json_list(machine.run(COMPUTE_ACCELERATORS)):
        if str(item.get("Status") or "OK") != "OK":
            # A device without a working driver cannot run anything; say so, do not list it.
            problems.add("npus", f"{item.get('Name')} is present but not working (status {item.get('Status')}); "
                         "installing the vendor's NPU driver may fix it")
            continue
        vendor, pci_id = _vendor(str(item.get("PNPDeviceID") or ""), str(item.get("Manufacturer") or ""))
        found.append(NpuInfo(vendor, " ".join(str(item.get("Name")).split()), pci_id=pci_id))
    return tuple(found)


def battery_saver(machine: Machine) -> bool | None:
    status = machine.windows_power_status()
    return status.get("system_status_flag") == 1
