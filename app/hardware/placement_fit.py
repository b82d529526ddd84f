"""The memory arithmetic of placement: what fits where, one candidate per device.

Pure functions over the report and the model's numbers; placement.py orders the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.hardware.memory import ACCELERATOR_OVERHEAD, memory_needed
from app.hardware.placement_types import ModelFacts, Placement, Runtime
from app.hardware.report import EpDevice, GpuInfo, HardwareReport, LlamaInfo

_MIB = 1024**2
_GIB = 1024**3
# Left free for the desktop and other programs: a tenth of the device, at least 512 MB.
MIN_MARGIN = 512 * _MIB
MARGIN_SHARE = 0.10
# llama.cpp's GPU backends and the GPU vendors they drive; None: any vendor.
_BACKEND_VENDORS: dict[str, str | None] = {
    "CUDA": "NVIDIA", "ROCm": "AMD", "HIP": "AMD", "Metal": "Apple", "SYCL": "Intel", "MUSA": "Moore Threads",
    "Vulkan": None, "OpenCL": None, "WebGPU": None,
}


def gb(size: int) -> str:
    return f"{size / _GIB:.1f} GB"


def margin(budget: int) -> int:
    return max(MIN_MARGIN, int(budget * MARGIN_SHARE))


@dataclass(frozen=True)
class Candidate:
    """A device the model could go to, or the words saying why it cannot."""

    placement: Placement
    integrated: bool
    usable: bool  # something of the model runs there
    whole: bool  # all of it does
    helps: bool  # a partial offload big enough to be worth it (a third of the layers)
    skip_note: str = ""


@dataclass(frozen=True)
class GpuBudget:
    """A GPU llama.cpp can use and the bytes it may fill."""

    name: str
    budget: int
    integrated: bool


def gpu_backends(llama: LlamaInfo) -> tuple[str, ...]:
    return tuple(name for name in llama.backends if name in _BACKEND_VENDORS)


def llama_gpu_budgets(report: HardwareReport) -> list[GpuBudget]:
    """The GPUs of llama.cpp's registry; the report's GPUs where the registry was not readable."""
    llama = report.llama
    if llama is None:
        return []
    ram_free = report.ram.available if report.ram else None
    budgets = []
    for device in llama.gpu_devices:
        name = device.description or device.name
        known = next((gpu for gpu in report.gpus if gpu.name.startswith(name) or name.startswith(gpu.name)), None)
        # Older ggml calls every GPU "gpu"; Metal always means Apple's unified memory.
        integrated = device.kind == "igpu" or device.backend == "Metal" or bool(known and known.integrated)
        budgets.append(_budget(name, device.memory_free or device.memory_total, integrated, ram_free))
    if budgets or not llama.gpu_offload:
        return budgets
    vendors = {_BACKEND_VENDORS[name] for name in gpu_backends(llama)}
    for gpu in report.gpus:
        if None in vendors or gpu.vendor in vendors:
            memory = gpu.free_memory or gpu.dedicated_memory or 0
            if gpu.integrated:
                memory = max(memory, gpu.shared_memory or 0)
            budgets.append(_budget(gpu.name, memory, bool(gpu.integrated), ram_free))
    return budgets


def _budget(name: str, memory: int, integrated: bool, ram_free: int | None) -> GpuBudget:
    # An integrated GPU's memory is the system's RAM: it cannot use more than is free.
    if integrated and ram_free is not None:
        memory = min(memory, ram_free)
    return GpuBudget(name, memory, integrated)


def fit_layers(model: ModelFacts, budget: int) -> tuple[int, int]:
    """(gpu_layers, bytes needed on the GPU): -1 when all fit, 0 when none does."""
    usable = budget - ACCELERATOR_OVERHEAD - margin(budget)
    whole = model.file_size + model.kv_cache_bytes
    if usable >= whole:
        return -1, model.memory_needed(on_cpu=False)
    if model.layers <= 0 or usable <= 0:
        return 0, model.memory_needed(on_cpu=False)
    # Weights and cache spread evenly over the blocks; the embeddings stay on the CPU.
    layers = min(model.layers - 1, int(usable // (whole / model.layers)))
    share = layers / model.layers
    return layers, memory_needed(int(model.file_size * share), int(model.kv_cache_bytes * share), on_cpu=False)


def gguf_gpu_candidate(model: ModelFacts, gpu: GpuBudget) -> Candidate:
    layers, needed = fit_layers(model, gpu.budget)
    total = f"{model.layers} layers" if model.layers else "the model"
    if layers == -1:
        reason = f"{gpu.name}: all {total} fit in {gb(gpu.budget)} ({gb(needed)} needed)"
        return Candidate(_gguf(gpu, -1, needed, reason), gpu.integrated, True, True, True)
    if layers == 0:
        note = (f"not even one of the {total} fits in the {gb(gpu.budget)} {gpu.name} has free"
                if model.layers else f"{gpu.name} has {gb(gpu.budget)} free and the model needs "
                f"{gb(needed)}; its layer count is unknown, so it cannot be split")
        return Candidate(_gguf(gpu, 0, needed, note), gpu.integrated, False, False, False, note)
    helps = 3 * layers >= model.layers
    reason = (f"{gpu.name}: only {layers} of {model.layers} layers fit in {gb(gpu.budget)}, partial offload; "
              "the rest run on the CPU")
    note = f"only {layers} of {model.layers} layers would fit in {gpu.name}'s {gb(gpu.budget)}, too few to help"
    return Candidate(_gguf(gpu, layers, needed, reason), gpu.integrated, True, False, helps, note)


def _gguf(gpu: GpuBudget, layers: int, needed: int, reason: str) -> Placement:
    return Placement(kind="gpu", device_name=gpu.name, backend=Runtime.LLAMA_CPP, memory_needed=needed,
                     reason=reason, gpu_layers=layers)


def ram_note(report: HardwareReport, needed: int) -> str:
    """Words for a CPU placement that may not fit in the RAM that is free."""
    if report.ram is None or needed <= report.ram.available:
        return ""
    return (f"; it needs about {gb(needed)} of memory and {gb(report.ram.available)} is free, "
            "so it may fail to load")


def onnx_budget(report: HardwareReport, device: EpDevice) -> tuple[int | None, bool]:
    """(bytes the device may fill or None when unknown, whether it shares the system's RAM)."""
    ram_free = report.ram.available if report.ram else None
    if device.kind in ("npu", "cpu"):
        return ram_free, True
    gpu = _matching_gpu(report.gpus, device)
    integrated = device.discrete is False or bool(gpu and gpu.integrated)
    if integrated:
        shared = (gpu.shared_memory if gpu else None) or ram_free
        return (min(shared, ram_free) if shared and ram_free else shared), True
    if gpu is not None and (gpu.free_memory or gpu.dedicated_memory):
        return gpu.free_memory or gpu.dedicated_memory, False
    return device.memory, False


def _matching_gpu(gpus: tuple[GpuInfo, ...], device: EpDevice) -> GpuInfo | None:
    pci_id = f"{device.vendor_id:04x}:{device.device_id:04x}"
    return next((gpu for gpu in gpus if gpu.pci_id == pci_id), None)
