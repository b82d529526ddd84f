"""The HardwareReport and the values in it: what the machine has, as plain frozen data."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

# Bumped when a key of to_dict() changes meaning or goes away; new keys do not bump it.
REPORT_VERSION = 1

DeviceKind = Literal["cpu", "gpu", "npu"]

# PCI vendor ids that matter here, as Windows (VEN_xxxx), sysfs (0x....) and ONNX
# Runtime (vendor_id) spell them.
PCI_VENDORS: dict[int, str] = {
    0x10DE: "NVIDIA",
    0x1002: "AMD",
    0x1022: "AMD",
    0x8086: "Intel",
    0x5143: "Qualcomm",
    0x106B: "Apple",
    0x1414: "Microsoft",
}


def vendor_name(vendor_id: int | None, fallback: str = "") -> str:
    """The short vendor name for a PCI vendor id, or the fallback text."""
    if vendor_id is not None and vendor_id in PCI_VENDORS:
        return PCI_VENDORS[vendor_id]
    return fallback or (f"vendor 0x{vendor_id:04x}" if vendor_id else "unknown")


@dataclass(frozen=True)
class OsInfo:
    """The operating system: `system` is Windows, Linux or Darwin."""

    system: str
    name: str
    version: str
    machine: str
    build: int | None = None


@dataclass(frozen=True)
class CpuInfo:
    """The processor and the instruction sets llama.cpp cares about (AVX2, AVX512F, NEON...)."""

    name: str
    cores: int | None
    threads: int | None
    architecture: str
    features: tuple[str, ...]


@dataclass(frozen=True)
class RamInfo:
    """System memory in bytes."""

    total: int
    available: int


@dataclass(frozen=True)
class GpuInfo:
    """One graphics adapter. Memory in bytes; None where the source could not tell."""

    vendor: str
    name: str
    dedicated_memory: int | None
    shared_memory: int | None = None
    free_memory: int | None = None
    driver: str | None = None
    integrated: bool | None = None
    pci_id: str | None = None  # "10de:2786"


@dataclass(frozen=True)
class NpuInfo:
    """One neural processor."""

    vendor: str
    name: str
    driver: str | None = None
    pci_id: str | None = None


@dataclass(frozen=True)
class EpDevice:
    """One (execution provider, device) pair from onnxruntime.get_ep_devices(), in its order."""

    provider: str
    provider_vendor: str
    kind: DeviceKind
    vendor: str
    vendor_id: int
    device_id: int
    name: str
    memory: int | None = None
    discrete: bool | None = None
    adapter_index: int | None = None  # DXGI adapter number: DirectML's device_id


@dataclass(frozen=True)
class WindowsMlStatus:
    """What the Windows ML execution-provider catalog did before discovery.

    state: not_windows, unsupported (older Windows), absent (no windowsml package),
    registered, nothing_ready, or failed.
    """

    state: str
    message: str
    registered: tuple[str, ...] = ()
    not_installed: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    # (provider, library path) of each provider the catalog made ready: ONNX Runtime
    # GenAI keeps its own registry and must be given the same libraries.
    libraries: tuple[tuple[str, str], ...] = ()


# Execution providers that are not a device here: ONNX Runtime's remote-inference provider.
NOT_DEVICE_PROVIDERS = frozenset({"AzureExecutionProvider"})


@dataclass(frozen=True)
class OnnxRuntimeInfo:
    """The installed ONNX Runtime and the providers it offers."""

    version: str
    providers: tuple[str, ...]
    windows_ml: WindowsMlStatus

    @property
    def device_providers(self) -> tuple[str, ...]:
        """The providers that run models on a device of this machine: what a person is shown.

        `providers` stays as ONNX Runtime lists it (doctor --json); the stock builds also list
        AzureExecutionProvider, which sends inputs to a cloud endpoint. Kestrel never uses it, and
        an offline app listing "Azure" among its providers alarms the people who chose it."""
        return tuple(provider for provider in self.providers if provider not in NOT_DEVICE_PROVIDERS)


@dataclass(frozen=True)
class LlamaDevice:
    """A device in llama.cpp's ggml backend registry; kind is cpu, gpu, igpu or accel."""

    name: str
    description: str
    kind: str
    backend: str
    memory_free: int
    memory_total: int


@dataclass(frozen=True)
class LlamaInfo:
    """What the installed llama.cpp build can do."""

    version: str
    gpu_offload: bool
    backends: tuple[str, ...]
    devices: tuple[LlamaDevice, ...]
    cpu_features: tuple[str, ...]
    libraries: tuple[str, ...]

    @property
    def gpu_devices(self) -> tuple[LlamaDevice, ...]:
        return tuple(d for d in self.devices if d.kind in ("gpu", "igpu"))


@dataclass(frozen=True)
class PowerInfo:
    """Battery and power-saving state; None where the machine does not say."""

    has_battery: bool
    on_battery: bool | None
    battery_percent: int | None = None
    battery_saver: bool | None = None

    @property
    def saving_power(self) -> bool:
        """Whether placement should prefer the most efficient device."""
        return bool(self.on_battery) or bool(self.battery_saver)


@dataclass(frozen=True)
class SourceError:
    """A source that failed, and why, in words."""

    source: str
    message: str


@dataclass(frozen=True)
class HardwareReport:
    """Everything the probe found. A field is None (or empty) when its source failed; errors says why."""

    os: OsInfo | None
    cpu: CpuInfo | None
    ram: RamInfo | None
    gpus: tuple[GpuInfo, ...]
    npus: tuple[NpuInfo, ...]
    ep_devices: tuple[EpDevice, ...]
    onnxruntime: OnnxRuntimeInfo | None
    llama: LlamaInfo | None
    power: PowerInfo | None
    errors: tuple[SourceError, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data with stable keys (see REPORT_VERSION)."""
        data = {field.name: _plain(getattr(self, field.name)) for field in dataclasses.fields(self)}
        return {"report_version": REPORT_VERSION, **data}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    return value
