"""The sources' pure parsers, fed what the tools print (recorded here, or in their documented format)."""

from __future__ import annotations

import pytest

from app.hardware.llama_source import cpu_features_from_system_info, llama_from
from app.hardware.onnx_source import ep_device_from, windows_build
from app.hardware.onnx_targets import OnnxTarget, genai_provider_key, provider_name, targets_from_genai_config
from app.hardware.sources_common import ordered_features
from app.hardware.sources_linux import parse_cpuinfo, parse_nvidia_smi
from app.hardware.sources_macos import parse_sysctl
from app.hardware.sources_windows import parse_display_registry, parse_json_list
from tests.hardware.machines import FIXTURES

_MIB = 1024**2


def fixture_text(*parts: str) -> str:
    return FIXTURES.joinpath(*parts).read_text(encoding="utf-8")


def test_cpuinfo_of_this_vm() -> None:
    name, features = parse_cpuinfo(fixture_text("linux_vm", "files", "proc", "cpuinfo"))
    assert name == "AMD EPYC"
    assert {"AVX", "AVX2", "FMA", "F16C", "SSE3"} <= set(features)
    assert "AVX512F" not in features


def test_cpuinfo_of_an_arm_board_uses_the_features_line() -> None:
    text = "processor\t: 0\nBogoMIPS\t: 48.00\nFeatures\t: fp asimd evtstrm aes asimdhp asimddp sve i8mm\n" \
           "CPU implementer\t: 0x41\n\nModel\t: Raspberry Pi 5 Model B Rev 1.0\n"
    name, features = parse_cpuinfo(text)
    assert name == "Raspberry Pi 5 Model B Rev 1.0"
    assert ordered_features(features) == ("NEON", "FP16", "DOTPROD", "MATMUL_INT8", "SVE")


def test_nvidia_smi_csv() -> None:
    gpus = parse_nvidia_smi(fixture_text("windows_desktop_rtx4070", "commands", "nvidia_smi.txt"))
    assert len(gpus) == 1
    assert gpus[0].name == "NVIDIA GeForce RTX 4070"
    assert (gpus[0].memory_total, gpus[0].memory_used) == (12282 * _MIB, 1187 * _MIB)
    assert gpus[0].driver == "566.36"


def test_nvidia_smi_with_two_cards_and_unsupported_field() -> None:
    gpus = parse_nvidia_smi("NVIDIA GeForce RTX 3090, 24576, 512, 550.54.15\r\n"
                            "NVIDIA GeForce GTX 1650, 4096, [N/A], 550.54.15\r\n")
    assert [g.name for g in gpus] == ["NVIDIA GeForce RTX 3090", "NVIDIA GeForce GTX 1650"]
    assert gpus[1].memory_used == 0


@pytest.mark.parametrize("text, names", [
    ('{\n    "Name":  "Only one"\n}', ["Only one"]),  # PowerShell unwraps a single object
    ('[\n    {\n        "Name":  "A"\n    },\n    {\n        "Name":  "B"\n    }\n]', ["A", "B"]),
    ("[\n\n]\n", []),
    ("", []),
    ('\ufeff[{"Name": "with a byte-order mark"}]', ["with a byte-order mark"]),
])
def test_powershell_json_shapes(text: str, names: list[str]) -> None:
    assert [item["Name"] for item in parse_json_list(text)] == names


def test_powershell_escapes_ampersands_in_device_ids() -> None:
    items = parse_json_list(fixture_text("windows_laptop_npu", "commands", "win32_videocontroller.txt"))
    assert items[0]["PNPDeviceID"].startswith("PCI\\VEN_8086&DEV_7D55&SUBSYS_")


def test_display_registry_reads_qword_and_binary_sizes() -> None:
    desktop = parse_display_registry(fixture_text("windows_desktop_rtx4070", "commands", "display_class_registry.txt"))
    radeon, rtx = desktop  # the registry's order, not WMI's
    assert rtx.memory == 12282 * _MIB  # qwMemorySize wins over the capped binary value
    assert rtx.matching_device_id == "pci\\ven_10de&dev_2786"
    assert radeon.matching_device_id == "pci\\ven_1002&dev_164e&subsys_88771043&rev_c9"  # lower-cased
    laptop = parse_display_registry(fixture_text("windows_laptop_npu", "commands", "display_class_registry.txt"))
    assert laptop[0].memory == 128 * _MIB  # REG_BINARY 00 00 00 08, little-endian


def test_sysctl_lines() -> None:
    values = parse_sysctl(fixture_text("macos_m2_pro", "commands", "sysctl.txt"))
    assert values["machdep.cpu.brand_string"] == "Apple M2 Pro"
    assert values["hw.memsize"] == "34359738368"
    assert values["hw.osenvironment"] == ""


def test_llama_system_info_sections() -> None:
    text = ("CUDA : ARCHS = 890 | USE_GRAPHS = 1 | CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 0 | "
            "LLAMAFILE = 1 | OPENMP = 1 | ")
    assert cpu_features_from_system_info(text) == ("SSE3", "AVX", "AVX2")


def test_llama_backends_come_from_registry_and_libraries() -> None:
    info, problems = llama_from({
        "version": "0.3.36", "supports_gpu_offload": False, "system_info": "",
        "libraries": ["ggml-base.dll", "ggml-cpu.dll", "ggml-vulkan.dll", "ggml.dll", "llama.dll"],
        "registry_error": "the ggml backend registry could not be read: no ggml library",
    })
    assert info.backends == ("CPU", "Vulkan")
    assert info.devices == ()
    assert problems == ["the ggml backend registry could not be read: no ggml library"]


def test_ep_device_from_directml_metadata() -> None:
    device = ep_device_from({
        "ep_name": "DmlExecutionProvider", "ep_vendor": "Microsoft",
        "device": {"type": "GPU", "vendor": "NVIDIA", "vendor_id": 4318, "device_id": 10118,
                   "metadata": {"Description": "NVIDIA GeForce RTX 4070", "DxgiAdapterNumber": "0",
                                "DxgiVideoMemory": "12011 MB", "Discrete": "1"}},
    })
    assert (device.kind, device.name, device.memory) == ("gpu", "NVIDIA GeForce RTX 4070", 12011 * _MIB)
    assert device.discrete is True and device.adapter_index == 0


def test_windows_build_from_platform_version() -> None:
    assert windows_build({"version": "10.0.26100"}) == 26100
    assert windows_build({"version": "6.8.0"}) == 0
    assert windows_build({"version": ""}) is None


def test_genai_config_provider_options() -> None:
    config = {"model": {"decoder": {"session_options": {"provider_options": [
        {"qnn": {"backend_path": "QnnHtp.dll", "htp_performance_mode": "burst"}},
        {"OpenVINO": {"device_type": "GPU.0"}},
        {"dml": {}},
    ]}}}}
    assert targets_from_genai_config(config) == (
        OnnxTarget("QNNExecutionProvider", "npu"), OnnxTarget("OpenVINOExecutionProvider", "gpu"),
        OnnxTarget("DmlExecutionProvider", "gpu"),
    )
    assert targets_from_genai_config({"model": {"decoder": {"session_options": {"provider_options": []}}}}) == ()
    assert provider_name("VitisAI") == provider_name("VitisAIExecutionProvider") == "VitisAIExecutionProvider"
    full_names = ("DmlExecutionProvider", "QNNExecutionProvider", "NvTensorRTRTXExecutionProvider",
                  "CPUExecutionProvider")
    assert [genai_provider_key(name) for name in full_names] == ["dml", "qnn", "nvtensorrtrtx", "cpu"]
