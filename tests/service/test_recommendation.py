"""The model recommended for a machine: the shipped catalog's fit on recorded machines picks the tier."""

from __future__ import annotations

import dataclasses

import pytest

from app.core.settings import DevicePreference
from app.hardware.report import HardwareReport, RamInfo
from app.library.catalog import load_catalog
from app.service.events import CatalogRow
from app.service.library.library_service import catalog_fit
from app.service.library.recommendation import recommend, with_reason
from tests.hardware.machines import recorded_report

_GIB = 1024**3


def machine(name: str, ram_gb: int | None = None) -> HardwareReport:
    """A recorded machine; ram_gb: as if it had that much memory, three quarters of it free."""
    report = recorded_report(name)
    if ram_gb is None:
        return report
    return dataclasses.replace(report, ram=RamInfo(total=ram_gb * _GIB, available=ram_gb * _GIB * 3 // 4))


def rows(report: HardwareReport | None, installed: str = "", context: int = 8192) -> list[CatalogRow]:
    """The shipped catalog as the library service lists it: each entry's fit at the app's context."""
    return [CatalogRow(e, catalog_fit(report, e, min(context, e.context_length), 0, DevicePreference.AUTO)
                       if report is not None else None, e.id if e.id == installed else None)
            for e in load_catalog()]


@pytest.mark.parametrize("ram_gb, chosen, reason", [
    (8, "qwen3-4b-q4_k_m", "Fits your 8 GB of memory with room for an 8k context."),
    (16, "qwen3-8b-q4_k_m", "Fits your 16 GB of memory with room for a 16k context."),
    # 30B-A3B fits 24 GB and runs well, but its 18.6 GB would leave the machine 5 GB: 14B (9 GB).
    (24, "qwen3-14b-q4_k_m", "Fits your 24 GB of memory with room for a 16k context."),
    (32, "qwen3-30b-a3b-q4_k_m", "Fits your 32 GB of memory with room for a 32k context."),
])
def test_the_memory_of_a_computer_without_a_gpu_picks_the_tier(ram_gb: int, chosen: str, reason: str) -> None:
    report = machine("linux_vm", ram_gb)

    picked = recommend(rows(report), report)

    assert picked is not None and (picked.row.entry.id, picked.reason) == (chosen, reason)


def test_a_graphics_card_picks_the_largest_model_it_holds_whole() -> None:
    report = machine("windows_desktop_rtx4070", 64)

    picked = recommend(rows(report), report)

    # The 14B would spill layers to the CPU and the 30B-A3B run on the CPU only: both run slowly.
    assert picked is not None and picked.row.entry.id == "qwen3-8b-q4_k_m"
    assert picked.reason == "Fits your 12 GB graphics card (NVIDIA GeForce RTX 4070) with room for a 16k context."


def test_an_integrated_gpu_is_said_to_share_the_memory() -> None:
    report = machine("linux_amd_laptop", 8)

    picked = recommend(rows(report), report)

    assert picked is not None and picked.row.entry.id == "qwen3-4b-q4_k_m"
    assert picked.reason.startswith("Fits the 16 GB your AMD Radeon 780M Graphics")


def test_too_little_memory_for_every_recommended_model_offers_a_smaller_chat_model() -> None:
    report = machine("linux_vm", 4)

    picked = recommend(rows(report), report)

    assert picked is not None and picked.row.entry.id == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert picked.row.entry.purpose.value == "chat" and picked.reason.startswith("Fits your 4 GB of memory")


def test_an_installed_model_is_not_offered_again_and_without_a_report_the_smallest_tier_is() -> None:
    report = machine("linux_vm", 16)
    assert recommend(rows(report, installed="qwen3-8b-q4_k_m"), report).row.entry.id == "qwen3-4b-q4_k_m"  # type: ignore[union-attr]

    unknown = recommend(rows(None), None)

    assert unknown is not None and unknown.row.entry.id == "qwen3-4b-q4_k_m"
    assert unknown.reason == "Whether it fits this machine is not known yet."
    row = with_reason(unknown)
    assert row is not None and row.reason == unknown.reason and row.entry == unknown.row.entry
    assert with_reason(None) is None


@pytest.mark.parametrize("name, npu", [("windows_laptop_npu", "Intel(R) AI Boost"),
                                       ("linux_amd_laptop", "AMD NPU (Ryzen AI)")])
def test_an_npu_no_catalog_model_runs_on_is_named_in_the_reason(name: str, npu: str) -> None:
    """Issue 26: the pick says why, NPU included. No catalog entry's fit goes to an NPU (the ONNX
    entry is a CPU build), so the owner is told rather than left to wonder."""
    report = machine(name)
    listed = rows(report)
    assert not any(r.fit is not None and r.fit.device_kind == "npu" for r in listed)

    picked = recommend(listed, report)

    assert picked is not None and picked.reason.startswith("Fits ")
    assert picked.reason.endswith(f". No model in Kestrel's catalog runs on your NPU ({npu}) yet.")


def test_an_npu_a_catalog_model_would_run_on_is_not_called_unused() -> None:
    report = machine("windows_laptop_npu")
    listed = rows(report)
    onnx = next(i for i, r in enumerate(listed) if r.entry.format == "onnx")
    fit = listed[onnx].fit
    assert fit is not None
    listed[onnx] = dataclasses.replace(listed[onnx], fit=dataclasses.replace(fit, device_kind="npu"))

    picked = recommend(listed, report)

    assert picked is not None and "NPU" not in picked.reason


def test_a_machine_without_an_npu_hears_nothing_of_one() -> None:
    report = machine("windows_desktop_rtx4070", 64)
    picked = recommend(rows(report), report)
    assert picked is not None and "NPU" not in picked.reason
