"""Will it fit? Verdicts, numbers and the longest context over the recorded machines."""

from __future__ import annotations

import dataclasses
import re
from functools import lru_cache

import pytest

from app.hardware.fit import CONTEXT_STEP, FitFacts, Verdict, at_context, estimate_fit, memory_need
from app.hardware.memory import F16, ModelShape, kv_cache_bytes
from app.hardware.placement import ModelFacts
from app.hardware.report import HardwareReport, RamInfo
from tests.hardware.machines import recorded_report

_GIB = 1024**3


def _gguf(size: int, layers: int, embd: int, heads: int, kv_heads: int, vocab: int, ff: int,
          trained: int, context: int = 4096) -> FitFacts:
    """A GGUF's numbers as fit_facts reads them from a header (head size embd / heads)."""
    kv = kv_cache_bytes(layers, context, kv_heads, embd // heads, F16)
    return FitFacts("gguf", size, context, kv, layers, shape=ModelShape(embd, heads, vocab, ff),
                    trained_context=trained)


# Real models' Q4_K_M sizes and shapes from their GGUF headers.
GEMMA2_2B = _gguf(1_708_582_752, 26, 2304, 8, 4, 256_000, 9216, 8192)
LLAMA31_8B = _gguf(4_920_734_272, 32, 4096, 32, 8, 128_256, 14_336, 131_072)
QWEN25_32B = _gguf(19_851_335_936, 64, 5120, 40, 8, 152_064, 27_648, 32_768)
LLAMA33_70B = _gguf(42_520_412_160, 80, 8192, 64, 8, 128_256, 28_672, 131_072)


@lru_cache(maxsize=None)
def machine(name: str) -> HardwareReport:
    return recorded_report(name)


def with_ram(report: HardwareReport, available: int, total: int = 64 * _GIB) -> HardwareReport:
    return dataclasses.replace(report, ram=RamInfo(total=total, available=available))


@pytest.mark.parametrize("name, model, context, preference, verdict, kind, words", [
    # A laptop's integrated GPU shares the RAM: an 8B model fits whole (battery saver keeps iGPUs).
    ("linux_amd_laptop", LLAMA31_8B, 8192, "auto", Verdict.RUNS_WELL, "gpu", "Runs well on the GPU (AMD Radeon 780M"),
    ("windows_desktop_rtx4070", LLAMA31_8B, 8192, "auto", Verdict.RUNS_WELL, "gpu",
     "Runs well on the GPU (NVIDIA GeForce RTX 4070)"),
    ("windows_desktop_rtx4070", QWEN25_32B, 4096, "auto", Verdict.RUNS_SLOWLY, "gpu", "layers on the GPU"),
    # Too big for the GPU to help and for the RAM that is free.
    ("windows_desktop_rtx4070", LLAMA33_70B, 8192, "auto", Verdict.WONT_FIT, "cpu", "Will not fit: needs"),
    ("windows_desktop_rtx4070", LLAMA31_8B, 8192, "cpu", Verdict.RUNS_WELL, "cpu", "Runs well on the CPU"),
    ("macos_m2_pro", QWEN25_32B, 4096, "auto", Verdict.RUNS_SLOWLY, "gpu", "the rest on the CPU"),
    ("linux_vm", GEMMA2_2B, 4096, "auto", Verdict.RUNS_WELL, "cpu", "Runs well on the CPU (AMD EPYC)"),
    ("windows_laptop_npu", LLAMA31_8B, 8192, "npu", Verdict.WONT_FIT, "npu", "Will not run on the NPU you chose"),
])
def test_verdicts_on_recorded_machines(name, model, context, preference, verdict, kind, words):
    fit = estimate_fit(machine(name), model, context_length=context, preference=preference)
    assert (fit.verdict, fit.device_kind) == (verdict, kind), fit.summary
    assert words in fit.summary


def test_cpu_only_when_the_gpu_cannot_hold_it_runs_slowly():
    report = with_ram(machine("windows_desktop_rtx4070"), 60 * _GIB)
    fit = estimate_fit(report, LLAMA33_70B, context_length=8192)
    assert fit.verdict == Verdict.RUNS_SLOWLY and fit.device_kind == "cpu"
    assert fit.summary.startswith("Runs slowly: CPU only, ")


@pytest.mark.parametrize("spare, verdict, words", [
    (4 * _GIB, Verdict.RUNS_WELL, "Runs well on the CPU"),
    (300 * 1024**2, Verdict.RUNS_SLOWLY, "only just fits in memory"),
    (100 * 1024**2, Verdict.WONT_FIT, "Will not fit: needs"),
])
def test_cpu_only_with_little_ram(spare, verdict, words):
    need = GEMMA2_2B.memory_needed(on_cpu=True)
    report = with_ram(machine("linux_vm"), need + spare, total=8 * _GIB)
    fit = estimate_fit(report, GEMMA2_2B, context_length=4096)
    assert fit.verdict == verdict and words in fit.summary
    assert fit.available == need + spare


def test_the_loaded_model_is_counted_back():
    need = GEMMA2_2B.memory_needed(on_cpu=True)
    report = with_ram(machine("linux_vm"), need - _GIB, total=16 * _GIB)
    assert estimate_fit(report, GEMMA2_2B, context_length=4096).verdict == Verdict.WONT_FIT
    fit = estimate_fit(report, GEMMA2_2B, context_length=4096, loaded_bytes=3 * _GIB)
    assert fit.verdict == Verdict.RUNS_WELL
    assert fit.freed_by_unloading == 3 * _GIB and fit.available == need + 2 * _GIB
    assert any("gives back 3.0 GB" in line for line in fit.lines)


def test_the_numbers_behind_it_in_words():
    fit = estimate_fit(machine("windows_desktop_rtx4070"), LLAMA31_8B, context_length=8192)
    need = memory_need(at_context(LLAMA31_8B, 8192), on_cpu=False)
    assert fit.need == need and need.total == at_context(LLAMA31_8B, 8192).memory_needed(on_cpu=False)
    assert fit.lines[0] == f"Weights: {need.weights / _GIB:.1f} GB"
    assert fit.lines[1] == "KV cache: 1.0 GB for 8,192 tokens (16-bit cache)"  # 32 x 8 x 128 x 2 x 2 x 8192
    assert any(line.startswith("Free on NVIDIA GeForce RTX 4070: ") for line in fit.lines)
    assert any(line.startswith("Longest context that fits: ") for line in fit.lines)
    for line in fit.lines:
        for number in re.findall(r"(\d[\d.]*) GB", line):
            assert re.fullmatch(r"\d+\.\d", number), line


def test_max_context_on_the_cpu_is_the_boundary():
    report = with_ram(machine("linux_vm"), 3 * _GIB)
    fit = estimate_fit(report, GEMMA2_2B, context_length=2048)
    assert fit.max_context is not None and 0 < fit.max_context < 8192
    assert fit.max_context % CONTEXT_STEP == 0
    assert estimate_fit(report, GEMMA2_2B, context_length=fit.max_context).verdict != Verdict.WONT_FIT
    assert estimate_fit(report, GEMMA2_2B, context_length=fit.max_context + CONTEXT_STEP).verdict == Verdict.WONT_FIT


def test_max_context_on_a_gpu_keeps_the_model_whole():
    report = machine("windows_desktop_rtx4070")
    fit = estimate_fit(report, LLAMA31_8B, context_length=4096)
    top = fit.max_context
    assert top is not None and 8192 < top < 131_072
    at_top = estimate_fit(report, LLAMA31_8B, context_length=top)
    past = estimate_fit(report, LLAMA31_8B, context_length=top + CONTEXT_STEP)
    assert at_top.verdict == Verdict.RUNS_WELL and at_top.device_kind == "gpu"
    assert past.verdict != Verdict.RUNS_WELL


def test_max_context_grows_with_free_memory_and_stops_at_the_trained_context():
    tops = [estimate_fit(with_ram(machine("linux_vm"), gib * _GIB), GEMMA2_2B, context_length=2048).max_context
            for gib in (2, 3, 4, 6, 32)]
    assert tops == sorted(tops) and tops[-1] == 8192


def test_no_context_fits_when_the_weights_alone_do_not():
    fit = estimate_fit(with_ram(machine("linux_vm"), _GIB), GEMMA2_2B, context_length=2048)
    assert fit.verdict == Verdict.WONT_FIT and fit.max_context == 0


def test_context_is_kept_within_the_trained_one_and_the_cache_follows_it():
    longer = at_context(GEMMA2_2B, 100_000)
    assert longer.context_length == 8192 and longer.kv_cache_bytes == GEMMA2_2B.kv_cache_bytes * 2
    assert at_context(GEMMA2_2B, 10).context_length == CONTEXT_STEP


def test_plain_model_facts_get_a_verdict_without_a_longest_context():
    plain = ModelFacts("gguf", GEMMA2_2B.file_size, 4096, GEMMA2_2B.kv_cache_bytes, layers=26)
    fit = estimate_fit(machine("linux_vm"), plain, context_length=4096)
    assert fit.verdict == Verdict.RUNS_WELL and fit.max_context is None


def test_honest_buffers_follow_llama_cpp():
    # Gemma 3 270M at 2048 tokens: llama.cpp logged a compute buffer of 514.50 MiB (the
    # logits of a 512-token batch over 262,144 tokens dominate it).
    gemma3 = FitFacts("gguf", 253_113_024, 2048, 36 * 1024**2, 18, shape=ModelShape(640, 4, 262_144, 2048),
                      trained_context=32_768)
    assert gemma3.compute_bytes(on_cpu=False) == pytest.approx(514.5 * 1024**2, rel=0.01)
    assert gemma3.memory_needed(on_cpu=True) < gemma3.memory_needed(on_cpu=False)
