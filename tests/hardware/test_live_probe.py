"""probe() on the machine the tests run on: real psutil, real onnxruntime, real llama.cpp."""

from __future__ import annotations

import json
import platform
import time

import psutil
import pytest

from app.hardware.llama_source import gather_llama
from app.hardware.probe import probe
from tests.hardware.machines import RecordedMachine


@pytest.fixture(scope="module")
def live_report():
    started = time.monotonic()
    report = probe()
    return report, time.monotonic() - started


def test_live_report_is_complete_and_quick(live_report) -> None:
    report, seconds = live_report
    assert report.errors == (), report.errors
    assert seconds < 30
    assert report.os.system == platform.system()
    assert report.cpu.threads == psutil.cpu_count(logical=True)
    assert 0 < report.ram.available <= report.ram.total == psutil.virtual_memory().total
    assert report.power is not None


def test_live_cpu_features_agree_with_llama_cpp(live_report) -> None:
    report, _ = live_report
    # What the OS reports and what this llama.cpp build uses must not contradict each other.
    llama_features = set(report.llama.cpu_features)
    for feature in ("AVX", "AVX2", "FMA", "F16C", "NEON"):
        if feature in llama_features:
            assert feature in report.cpu.features


def test_live_onnxruntime_has_a_cpu_device(live_report) -> None:
    import onnxruntime

    report, _ = live_report
    assert report.onnxruntime.version == onnxruntime.__version__
    assert "CPUExecutionProvider" in report.onnxruntime.providers
    assert any(d.provider == "CPUExecutionProvider" and d.kind == "cpu" for d in report.ep_devices)


def test_live_llama_matches_the_installed_build(live_report) -> None:
    import llama_cpp

    report, _ = live_report
    assert report.llama.gpu_offload == bool(llama_cpp.llama_supports_gpu_offload())
    assert "CPU" in report.llama.backends
    cpu_devices = [d for d in report.llama.devices if d.kind == "cpu"]
    assert cpu_devices and cpu_devices[0].memory_total > 0
    if not report.llama.gpu_offload:
        assert report.llama.gpu_devices == ()


def test_live_report_round_trips_through_json(live_report) -> None:
    report, _ = live_report
    data = json.loads(json.dumps(report.to_dict()))
    assert data["cpu"]["name"] == report.cpu.name
    assert data["llama"]["backends"] == list(report.llama.backends)


def test_recorded_vm_fixture_matches_this_machine(live_report) -> None:
    """The linux_vm fixture was recorded here; replaying it must describe the same machine."""
    report, _ = live_report
    recorded = probe(RecordedMachine("linux_vm"))
    # Hosts of one cloud machine type share the CPU's name and the RAM but not always its
    # instruction sets (one here lists AVX_VNNI and three more): the features are part of
    # which machine this is, not something replaying could get wrong on its own.
    if (report.os.system, report.cpu.name, report.ram.total, report.cpu.features) != (
            recorded.os.system, recorded.cpu.name, recorded.ram.total, recorded.cpu.features):
        pytest.skip("only the machine the linux_vm fixture was recorded on can compare with it")
    assert (recorded.cpu.cores, recorded.cpu.threads) == (report.cpu.cores, report.cpu.threads)
    assert recorded.gpus == report.gpus and recorded.npus == report.npus
    assert [d.provider for d in recorded.ep_devices] == [d.provider for d in report.ep_devices]
    assert recorded.llama.backends == report.llama.backends


def test_ggml_registry_is_read_from_the_shipped_libraries() -> None:
    facts = gather_llama()
    assert "registry_error" not in facts
    assert "CPU" in facts["registry"]["backends"]
    assert all(name.endswith((".so", ".dylib", ".dll")) for name in facts["libraries"])
