"""Placement over the recorded machines: which device comes first, with how many layers, and why."""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache

import pytest

from app.hardware.onnx_targets import OnnxTarget
from app.hardware.memory import F32, gguf_kv_cache_bytes, kv_cache_bytes, memory_needed
from app.hardware.placement import ALL_LAYERS, ModelFacts, PlacementRefused, place
from app.hardware.probe import probe
from app.hardware.report import HardwareReport, PowerInfo
from tests.hardware.machines import FIXTURES, RecordedMachine

_GIB = 1024**3

# Real models' sizes and shapes (Q4_K_M files), with the cache their context needs.
GEMMA2_2B = ModelFacts("gguf", 1_708_582_752, 4096, gguf_kv_cache_bytes(26, 4096, 2304, 8, 4), layers=26)
LLAMA31_8B = ModelFacts("gguf", 4_920_734_272, 8192, gguf_kv_cache_bytes(32, 8192, 4096, 32, 8), layers=32)
QWEN25_32B = ModelFacts("gguf", 19_851_335_936, 4096, gguf_kv_cache_bytes(64, 4096, 5120, 40, 8), layers=64)
LLAMA33_70B = ModelFacts("gguf", 42_520_412_160, 8192, gguf_kv_cache_bytes(80, 8192, 8192, 64, 8), layers=80)
PHI35_OPENVINO_NPU = ModelFacts("onnx", 2_300_000_000, 4096, 400 * 1024**2,
                                onnx_targets=(OnnxTarget("OpenVINOExecutionProvider", "npu"),))
PHI35_DML = ModelFacts("onnx", 2_300_000_000, 4096, 400 * 1024**2, onnx_targets=(OnnxTarget("dml"),))
PHI35_CPU = ModelFacts("onnx", 2_700_000_000, 4096, 400 * 1024**2)

ON_BATTERY = PowerInfo(has_battery=True, on_battery=True, battery_percent=40)
# The laptop with a Vulkan build of llama.cpp: Intel's iGPU shares half the RAM.
LAPTOP_VULKAN = {
    "version": "0.3.36", "supports_gpu_offload": True, "system_info": "CPU : AVX2 = 1 | ",
    "libraries": ["ggml-base.dll", "ggml-cpu.dll", "ggml-vulkan.dll", "ggml.dll", "llama.dll"],
    "registry": {"backends": ["Vulkan", "CPU"], "devices": [
        {"name": "Vulkan0", "description": "Intel(R) Arc(TM) Graphics", "type": 2, "backend": "Vulkan",
         "memory_free": 16_978_468_864, "memory_total": 16_978_468_864}]},
}




def npu_without_provider() -> dict:
    """The laptop's ONNX Runtime answer without its NPU device: Windows lists the NPU but no
    provider claims it, as reported for a Core Ultra 5 226V (microsoft/onnxruntime#25557)."""
    recorded = json.loads((FIXTURES / "windows_laptop_npu" / "onnxruntime.json").read_text(encoding="utf-8"))
    recorded["ep_devices"] = [d for d in recorded["ep_devices"] if d["device"]["type"] != "NPU"]
    return recorded


@lru_cache(maxsize=None)
def machine(name: str) -> HardwareReport:
    if name == "windows_laptop_vulkan":
        return probe(RecordedMachine("windows_laptop_npu", llama=LAPTOP_VULKAN))
    if name == "windows_laptop_npu_unoffered":
        return probe(RecordedMachine("windows_laptop_npu", onnxruntime=npu_without_provider()))
    return probe(RecordedMachine(name))


# machine, model, preference, power, first kind, first gpu_layers, words its reason must hold
AUTO_CASES = [
    ("windows_desktop_rtx4070", GEMMA2_2B, None, "gpu", ALL_LAYERS, ["NVIDIA GeForce RTX 4070", "all 26 layers fit"]),
    ("windows_desktop_rtx4070", LLAMA31_8B, None, "gpu", ALL_LAYERS, ["all 32 layers fit", "10.6 GB"]),
    # 10.6 GB free - 0.5 GB working space - 1.1 GB margin = 9.1 GB; 20.9 GB over 64 layers: 29 fit.
    ("windows_desktop_rtx4070", QWEN25_32B, None, "gpu", 29, ["only 29 of 64 layers", "partial offload"]),
    # 17 of 80 layers is less than a third: not worth it, the CPU runs it all.
    ("windows_desktop_rtx4070", LLAMA33_70B, None, "cpu", 0, ["only 17 of 80 layers", "too few to help"]),
    ("windows_desktop_rtx4070", PHI35_DML, None, "gpu", 0, ["NVIDIA GeForce RTX 4070", "DmlExecutionProvider"]),
    ("windows_desktop_rtx4070", LLAMA31_8B, ON_BATTERY, "cpu", 0, ["on battery", "RTX 4070 is left out"]),
    ("windows_laptop_npu", LLAMA31_8B, None, "cpu", 0, ["no GPU that llama.cpp can use",
                                                        "this build has no GPU backend"]),
    ("windows_laptop_npu", PHI35_OPENVINO_NPU, None, "npu", 0, ["Intel(R) AI Boost", "OpenVINOExecutionProvider"]),
    ("windows_laptop_npu", PHI35_OPENVINO_NPU, ON_BATTERY, "npu", 0, ["Intel(R) AI Boost"]),
    ("windows_laptop_npu", PHI35_DML, ON_BATTERY, "gpu", 0, ["Intel(R) Arc(TM) Graphics", "system memory"]),
    ("windows_laptop_npu", PHI35_CPU, None, "cpu", 0, ["built for the CPU only"]),
    ("windows_laptop_npu_unoffered", PHI35_OPENVINO_NPU, None, "cpu", 0,
     ["no device here for OpenVINOExecutionProvider (NPU)", "the system lists Intel(R) AI Boost",
      "no ONNX Runtime provider offers it"]),
    ("windows_laptop_vulkan", LLAMA31_8B, ON_BATTERY, "gpu", ALL_LAYERS, ["Intel(R) Arc(TM) Graphics", "all 32"]),
    ("linux_amd_laptop", LLAMA31_8B, None, "gpu", ALL_LAYERS, ["AMD Radeon 780M", "all 32 layers fit"]),
    ("linux_amd_laptop", QWEN25_32B, None, "gpu", 44, ["only 44 of 64 layers"]),
    ("linux_amd_laptop", PHI35_OPENVINO_NPU, None, "cpu", 0, ["no device here for OpenVINOExecutionProvider (NPU)"]),
    ("macos_m2_pro", LLAMA31_8B, ON_BATTERY, "gpu", ALL_LAYERS, ["Apple M2 Pro", "all 32 layers"]),
    ("linux_vm", LLAMA31_8B, None, "cpu", 0, ["this build has no GPU backend"]),
    ("linux_vm", LLAMA33_70B, None, "cpu", 0, ["44.3 GB of memory", "may fail to load"]),
]


@pytest.mark.parametrize("name, model, power, kind, layers, words", AUTO_CASES)
def test_auto_puts_first(name: str, model: ModelFacts, power: PowerInfo | None, kind: str, layers: int,
                         words: list[str]) -> None:
    placements = place(machine(name), model, "auto", power)
    first = placements[0]
    assert (first.kind, first.gpu_layers) == (kind, layers), first.reason
    reason = first.reason
    for word in words:
        assert word in reason, reason
    assert placements[-1].kind == "cpu"  # the CPU is always the last fall-back
    assert [p.kind for p in placements].count("cpu") == 1


def test_partial_offload_needs_less_memory_than_the_whole_model() -> None:
    [gpu, cpu] = place(machine("windows_desktop_rtx4070"), QWEN25_32B)
    assert gpu.memory_needed < QWEN25_32B.file_size
    assert cpu.reason.startswith("CPU: the fall-back")
    assert cpu.memory_needed > QWEN25_32B.file_size


def test_discrete_gpu_comes_before_integrated_when_plugged_in() -> None:
    placements = place(machine("windows_desktop_rtx4070"), PHI35_DML)
    assert [(p.device_name, p.device_id, p.ep_device_index) for p in placements] == [
        ("NVIDIA GeForce RTX 4070", 0, 1), ("AMD Radeon(TM) Graphics", 1, 2),
        ("AMD Ryzen 7 7800X3D 8-Core Processor", None, 0)]
    assert placements[-1].provider == "CPUExecutionProvider"


def test_on_battery_the_desktop_gpu_is_left_out_for_onnx_too() -> None:
    placements = place(machine("windows_desktop_rtx4070"), PHI35_DML, power=ON_BATTERY)
    assert [p.device_name for p in placements][:1] == ["AMD Radeon(TM) Graphics"]
    assert "RTX 4070 is left out to save power" in placements[-1].reason


def test_battery_saver_counts_as_saving_power() -> None:
    saver = PowerInfo(has_battery=True, on_battery=False, battery_saver=True)
    assert place(machine("windows_desktop_rtx4070"), LLAMA31_8B, power=saver)[0].kind == "cpu"


# machine, model, preference, words the refusal must hold
REFUSALS = [
    ("windows_laptop_npu", LLAMA31_8B, "gpu", ["this build has no GPU backend", "Install a llama.cpp build"]),
    ("windows_laptop_npu", LLAMA31_8B, "npu", ["cannot run a GGUF model on an NPU"]),
    ("windows_laptop_npu", PHI35_DML, "npu", ["no NPU device for DmlExecutionProvider"]),
    ("windows_laptop_npu_unoffered", PHI35_OPENVINO_NPU, "npu",
     ["no NPU device for OpenVINOExecutionProvider (NPU)", "the system lists Intel(R) AI Boost"]),
    ("windows_desktop_rtx4070", PHI35_OPENVINO_NPU, "npu", ["Windows 11 24H2", "DirectML and CPU remain"]),
    ("windows_desktop_rtx4070", PHI35_OPENVINO_NPU, "gpu",
     ["built for OpenVINOExecutionProvider (NPU), not for a GPU"]),
    ("linux_vm", PHI35_CPU, "gpu", ["built for the CPU only"]),
]


@pytest.mark.parametrize("name, model, preference, words", REFUSALS)
def test_a_forced_choice_that_cannot_work_says_why(name: str, model: ModelFacts, preference: str,
                                                   words: list[str]) -> None:
    with pytest.raises(PlacementRefused) as refused:
        place(machine(name), model, preference)
    assert refused.value.preference == preference
    for word in words:
        assert word in str(refused.value)


def test_forced_gpu_takes_even_a_small_partial_offload() -> None:
    [only] = place(machine("windows_desktop_rtx4070"), LLAMA33_70B, "gpu")
    assert (only.kind, only.gpu_layers) == ("gpu", 17)


def test_forced_gpu_refuses_when_not_one_layer_fits() -> None:
    report = machine("windows_desktop_rtx4070")
    crowded = dataclasses.replace(report.llama, devices=tuple(
        dataclasses.replace(d, memory_free=600 * 1024**2) for d in report.llama.devices))
    with pytest.raises(PlacementRefused, match="not even one of the 80 layers fits"):
        place(dataclasses.replace(report, llama=crowded), LLAMA33_70B, "gpu")


def test_forced_choices_never_fall_back() -> None:
    assert [p.kind for p in place(machine("windows_laptop_npu"), PHI35_OPENVINO_NPU, "npu")] == ["npu"]
    assert [p.kind for p in place(machine("windows_desktop_rtx4070"), LLAMA31_8B, "gpu")] == ["gpu"]
    [cpu] = place(machine("windows_desktop_rtx4070"), LLAMA31_8B, "cpu")
    assert (cpu.kind, cpu.gpu_layers, cpu.reason) == ("cpu", 0, "CPU: chosen in settings")


def test_unknown_llama_cpp_is_said_not_guessed() -> None:
    report = dataclasses.replace(machine("windows_desktop_rtx4070"), llama=None)
    [cpu] = place(report, LLAMA31_8B)
    assert "llama.cpp could not be checked" in cpu.reason


def test_registry_unreadable_falls_back_to_the_report_gpus() -> None:
    report = machine("windows_desktop_rtx4070")
    no_registry = dataclasses.replace(report, llama=dataclasses.replace(report.llama, devices=()))
    first = place(no_registry, LLAMA31_8B)[0]
    # CUDA drives NVIDIA only: the Radeon is not offered, the RTX is, with nvidia-smi's free memory.
    assert (first.device_name, first.gpu_layers) == ("NVIDIA GeForce RTX 4070", ALL_LAYERS)


def test_kv_cache_bytes_match_llama_cpp_and_onnx_exports() -> None:
    # Llama 3.1 8B at 8192 tokens: 32 layers x 8 KV heads x 128 dims x K and V x 2 bytes.
    assert gguf_kv_cache_bytes(32, 8192, 4096, 32, 8) == 1 * _GIB
    assert gguf_kv_cache_bytes(0, 8192, 4096, 32, 8) == 0
    # The same shape exported for ONNX Runtime's CPU keeps a float32 cache: twice the bytes.
    assert kv_cache_bytes(32, 8192, 8, 128, F32) == 2 * _GIB


def test_each_placement_counts_what_the_engine_checks_before_it_loads() -> None:
    gpu, *_, cpu = place(machine("windows_desktop_rtx4070"), PHI35_DML)
    assert gpu.memory_needed == memory_needed(PHI35_DML.file_size, PHI35_DML.kv_cache_bytes, on_cpu=False)
    assert cpu.memory_needed == PHI35_DML.memory_needed(on_cpu=True)
    [gguf_cpu] = place(machine("windows_desktop_rtx4070"), LLAMA31_8B, "cpu")
    assert gguf_cpu.memory_needed == memory_needed(LLAMA31_8B.file_size, LLAMA31_8B.kv_cache_bytes, on_cpu=True)


def test_bad_preference_is_a_bug() -> None:
    with pytest.raises(ValueError):
        place(machine("linux_vm"), LLAMA31_8B, "tpu")  # type: ignore[arg-type]
