"""probe() over whole recorded machines, and over machines where one source breaks."""

from __future__ import annotations

import json

import pytest

from app.hardware.machine import CommandFailed
from app.hardware.probe import probe
from tests.hardware.machines import RecordedMachine

_GIB = 1024**3


def test_windows_laptop_with_npu_and_integrated_gpu() -> None:
    report = probe(RecordedMachine("windows_laptop_npu"))
    assert report.errors == ()
    assert (report.os.name, report.os.build) == ("Windows 11", 26100)  # Python says "10" before 3.12
    assert report.cpu.name == "Intel(R) Core(TM) Ultra 7 155H"
    assert (report.cpu.cores, report.cpu.threads) == (16, 22)
    assert "AVX2" in report.cpu.features and "AVX512F" not in report.cpu.features
    [gpu] = report.gpus
    assert (gpu.vendor, gpu.name, gpu.pci_id) == ("Intel", "Intel(R) Arc(TM) Graphics", "8086:7d55")
    assert gpu.integrated is True  # DXCore's Discrete=0, through ONNX Runtime
    assert gpu.dedicated_memory == 128 * 1024**2
    assert gpu.shared_memory == report.ram.total // 2
    [npu] = report.npus
    assert (npu.vendor, npu.name, npu.pci_id) == ("Intel", "Intel(R) AI Boost", "8086:7d1d")
    npu_devices = [d for d in report.ep_devices if d.kind == "npu"]
    assert [(d.provider, d.name) for d in npu_devices] == [("OpenVINOExecutionProvider", "Intel(R) AI Boost")]
    assert report.onnxruntime.windows_ml.registered == ("OpenVINOExecutionProvider",)
    assert report.llama.gpu_offload is False and report.llama.backends == ("CPU",)
    assert (report.power.has_battery, report.power.on_battery, report.power.battery_saver) == (True, False, False)


def test_windows_desktop_with_rtx_4070() -> None:
    report = probe(RecordedMachine("windows_desktop_rtx4070"))
    assert report.errors == ()
    assert report.cpu.name == "AMD Ryzen 7 7800X3D 8-Core Processor"  # WMI pads AMD names with spaces
    assert "AVX512F" in report.cpu.features
    names = [gpu.name for gpu in report.gpus]
    assert names == ["NVIDIA GeForce RTX 4070", "AMD Radeon(TM) Graphics"]  # the RDP adapter is left out
    rtx, radeon = report.gpus
    # AdapterRAM says 4 GB (a uint32); nvidia-smi and the registry know better.
    assert rtx.dedicated_memory == 12282 * 1024**2
    assert rtx.free_memory == (12282 - 1187) * 1024**2
    assert rtx.driver.startswith("566.36") and rtx.integrated is False
    assert radeon.integrated is True and radeon.dedicated_memory == 512 * 1024**2
    assert report.npus == ()
    assert report.onnxruntime.windows_ml.state == "unsupported"
    assert report.llama.gpu_offload and report.llama.backends == ("CUDA", "CPU")
    assert [d.description for d in report.llama.gpu_devices] == ["NVIDIA GeForce RTX 4070"]
    assert report.power.has_battery is False


def test_linux_laptop_with_amd_apu_and_npu() -> None:
    report = probe(RecordedMachine("linux_amd_laptop"))
    assert report.errors == ()
    assert report.os.name == "Ubuntu 24.04.1 LTS"
    assert {"AVX512F", "AVX512_VNNI", "AVX512_BF16"} <= set(report.cpu.features)
    [gpu] = report.gpus  # card1-eDP-1 is a connector, not a card
    assert (gpu.vendor, gpu.pci_id, gpu.driver, gpu.integrated) == ("AMD", "1002:1900", "amdgpu", True)
    assert gpu.dedicated_memory == 512 * 1024**2 and gpu.shared_memory == 16474324992
    assert gpu.free_memory == 512 * 1024**2 - 201326592
    [npu] = report.npus
    assert (npu.vendor, npu.driver, npu.pci_id) == ("AMD", "amdxdna", "1022:1502")
    assert (report.power.on_battery, report.power.battery_percent, report.power.battery_saver) == (True, 54, True)
    assert report.llama.gpu_devices[0].kind == "igpu"


def test_macbook_with_unified_memory() -> None:
    report = probe(RecordedMachine("macos_m2_pro"))
    assert report.errors == ()
    assert report.os.name == "macOS 14.5"
    assert report.cpu.features == ("NEON", "FP16", "DOTPROD", "MATMUL_INT8")
    [gpu] = report.gpus
    assert (gpu.name, gpu.dedicated_memory, gpu.shared_memory, gpu.integrated) == (
        "Apple M2 Pro GPU", None, 32 * _GIB, True)
    assert [npu.name for npu in report.npus] == ["Apple Neural Engine"]
    assert report.power.battery_saver is False


def test_this_vm_as_recorded() -> None:
    report = probe(RecordedMachine("linux_vm"))
    assert report.errors == ()
    assert report.cpu.name == "AMD EPYC"
    assert report.gpus == () and report.npus == ()  # no /sys/class/drm, no nvidia-smi
    assert [(d.provider, d.kind) for d in report.ep_devices] == [("CPUExecutionProvider", "cpu")]
    assert report.llama.gpu_offload is False


def test_report_json_has_the_stable_keys() -> None:
    data = json.loads(json.dumps(probe(RecordedMachine("windows_desktop_rtx4070")).to_dict()))
    assert {"os", "cpu", "ram", "gpus", "npus", "ep_devices", "llama", "power", "errors"} <= set(data)
    assert data["gpus"][0]["dedicated_memory"] == 12282 * 1024**2
    assert data["ep_devices"][1]["provider"] == "DmlExecutionProvider"


class FailingCommand(RecordedMachine):
    """A recorded machine on which one command fails."""

    def __init__(self, folder: str, command: str, **overrides: object) -> None:
        super().__init__(folder, **overrides)
        self.failing = command

    def run(self, command):
        if command.name == self.failing:
            raise CommandFailed(f"{command.name} did not answer within 20 s")
        return super().run(command)


def test_failed_registry_keeps_the_gpus_with_capped_memory() -> None:
    report = probe(FailingCommand("windows_desktop_rtx4070", "display_class_registry"))
    assert [(e.source, "4 GB" in e.message) for e in report.errors] == [("gpus", True)]
    # nvidia-smi still knows the NVIDIA card; the Radeon falls back to WMI's AdapterRAM.
    assert report.gpus[0].dedicated_memory == 12282 * 1024**2
    assert report.gpus[1].dedicated_memory == 536870912


def test_failed_wmi_costs_only_the_gpus() -> None:
    report = probe(FailingCommand("windows_laptop_npu", "win32_videocontroller"))
    assert [e.source for e in report.errors] == ["gpus"]
    assert "did not answer" in report.errors[0].message
    assert report.gpus == ()
    assert report.npus and report.cpu and report.ep_devices  # everything else is still there


def test_broken_nvidia_smi_is_reported_not_fatal() -> None:
    report = probe(FailingCommand("windows_desktop_rtx4070", "nvidia_smi"))
    assert [e.source for e in report.errors] == ["gpus"]
    assert report.errors[0].message.startswith("nvidia-smi failed")
    # From the registry instead: qwMemorySize is what nvidia-smi calls 12282 MiB. The
    # registry lists the Radeon first and WMI the RTX first; they are matched by device id.
    assert report.gpus[0].dedicated_memory == 12_878_610_432 == 12282 * 1024**2
    assert report.gpus[1].dedicated_memory == 536870912


@pytest.mark.parametrize("api, field", [("onnxruntime", "onnxruntime"), ("llama", "llama"), ("psutil", "ram")])
def test_a_failing_python_source_fails_alone(api: str, field: str) -> None:
    machine = RecordedMachine("windows_laptop_npu", **{api: ImportError(f"No module named '{api}'")})
    report = probe(machine)
    assert getattr(report, field) is None
    assert any(api in error.message for error in report.errors)
    assert report.os.name == "Windows 11" and report.npus


def test_a_parser_meeting_garbage_reports_the_exception() -> None:
    class Garbled(RecordedMachine):
        def run(self, command):
            return "<html>not json</html>" if command.name == "compute_accelerators" else super().run(command)

    report = probe(Garbled("windows_laptop_npu"))
    assert [e.source for e in report.errors] == ["npus"]
    assert report.errors[0].message.startswith("JSONDecodeError")


def test_unknown_operating_system() -> None:
    report = probe(RecordedMachine("linux_vm", platform={"system": "FreeBSD", "release": "14.1",
                                                        "version": "", "machine": "amd64"}))
    assert {e.source for e in report.errors} == {"cpu", "gpus", "npus"}
    assert "FreeBSD" in report.errors[0].message
    assert report.ram is not None and report.power is not None
