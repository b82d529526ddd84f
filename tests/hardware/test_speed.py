"""Predicted decode speed: the arithmetic on recorded machines, a measured calibration, the verdict words."""

from __future__ import annotations

import dataclasses

import pytest

from app.hardware.fit import Verdict, estimate_fit, with_others_now, with_speed
from app.hardware.report import RamInfo
from app.hardware.speed import (ACCELERATOR_EFFICIENCY, CPU_MEMORY_CAP, CPU_THREAD_RATE, KERNEL_COST,
                                THREAD_SYNC_S, TOKEN_OVERHEAD_S, DecodeCost, Measured, SpeedEstimate, active_share,
                                decode_cost, embedding_table_share, predict)
from tests.hardware.test_fit import GEMMA2_2B, LLAMA31_8B, machine

_GIB = 1024**3
STARTER = 491_400_064  # Qwen2.5-Coder 0.5B Instruct Q4_K_M


def test_a_cpu_token_reads_the_weights_and_the_cache_at_the_estimated_rate_per_thread() -> None:
    report = machine("linux_vm")  # 2-core AMD EPYC with AVX2
    cost = DecodeCost(weights=2_000_000_000, kv_cache=0)

    speed = predict(report, cost, kind="cpu", device_name="AMD EPYC", threads=2)

    seconds = 2e9 / (2 * CPU_THREAD_RATE["avx2"]) + TOKEN_OVERHEAD_S + THREAD_SYNC_S
    assert speed.tokens_per_s == pytest.approx(1 / seconds)
    assert not speed.measured and speed.words == "about 15 tokens/s here (estimated)"
    assert speed.basis.startswith("estimated: no model measured here yet; 15 GB/s a thread")


def test_many_threads_stop_at_the_memory_cap() -> None:
    report = machine("windows_desktop_rtx4070")  # 8 cores: 8 x 10 GB/s would pass what two channels give
    speed = predict(report, DecodeCost(4_000_000_000, 0), kind="cpu", device_name="Ryzen", threads=8)
    assert speed.tokens_per_s == pytest.approx(1 / (4e9 / CPU_MEMORY_CAP + TOKEN_OVERHEAD_S + 7 * THREAD_SYNC_S))


def test_a_measurement_here_calibrates_the_rate_and_is_said_as_measured() -> None:
    report = machine("linux_vm")
    measured = (Measured("starter.gguf", STARTER, 30.0, 1), Measured("tiny.gguf", 738_912, 1250.0, 1))

    one = predict(report, DecodeCost(STARTER, 0), kind="cpu", device_name="AMD EPYC", threads=1,
                  measured=measured)
    bigger = predict(report, DecodeCost(3 * STARTER, 0), kind="cpu", device_name="AMD EPYC", threads=1,
                     measured=measured)
    two = predict(report, DecodeCost(STARTER, 0), kind="cpu", device_name="AMD EPYC", threads=2,
                  measured=measured)

    # The tiny model says nothing of the rate (its fixed cost is most of its time); the starter does.
    assert one.tokens_per_s == pytest.approx(30.0) and one.measured
    rate = STARTER / (1 / 30.0 - TOKEN_OVERHEAD_S)
    assert bigger.tokens_per_s == pytest.approx(1 / (3 * STARTER / rate + TOKEN_OVERHEAD_S))
    assert two.tokens_per_s == pytest.approx(1 / (STARTER / (2 * rate) + TOKEN_OVERHEAD_S + THREAD_SYNC_S))
    assert one.words == "about 30 tokens/s here" and "measured: starter.gguf decoded at 30.0" in one.basis


def test_a_measured_model_calibrates_by_what_its_tokens_read_not_by_its_file() -> None:
    report = machine("linux_vm")
    # Two files of the same size: one reads 60% of itself a token, the other all of it.
    lean = (Measured("lean.gguf", STARTER, 30.0, 1, read_bytes=int(STARTER * 0.6)),)
    whole = (Measured("whole.gguf", STARTER, 30.0, 1),)
    cost = DecodeCost(STARTER, 0)
    slow_rate = predict(report, cost, kind="cpu", device_name="AMD EPYC", threads=1, measured=lean)
    fast_rate = predict(report, cost, kind="cpu", device_name="AMD EPYC", threads=1, measured=whole)
    # The lean model reached 30 tokens/s reading less: the rate is lower, a model reading all is slower.
    assert slow_rate.tokens_per_s < 0.65 * fast_rate.tokens_per_s


def test_a_token_reads_one_row_of_the_embedding_table_and_slow_formats_weigh_more() -> None:
    plain = decode_cost(1_000, 0, 0, read_per_token={"Q4_K": 600, "Q6_K": 200})
    fifth_bit = decode_cost(1_000, 0, 0, read_per_token={"Q4_K": 600, "Q5_0": 200})
    assert plain.weights == 800  # the file's other 200 bytes: the table a token reads one row of
    assert fifth_bit.weights == round(600 + 200 * KERNEL_COST["Q5_0"])
    # Without the header's list: the file less the table's estimated share.
    assert decode_cost(1_000, 0, 0, embedding_share=0.25).weights == 750
    assert decode_cost(1_000, 0, 0).weights == 1_000


@pytest.mark.parametrize("words, vocab, width, share", [
    ("1.5B", 151_936, 1_536, 151_936 * 1_536 / 1.5e9), ("8B", 128_256, 4_096, 128_256 * 4_096 / 8e9),
    ("", 151_936, 1_536, 0.0), ("1.5B", 0, 1_536, 0.0), ("0.01B", 151_936, 1_536, 0.0),
])
def test_the_embedding_tables_share_comes_from_the_size_words_and_shape(words: str, vocab: int, width: int,
                                                                        share: float) -> None:
    assert embedding_table_share(words, vocab, width) == pytest.approx(share)


def test_a_gpu_reads_at_its_published_bandwidth_and_says_it_is_unproven() -> None:
    report = machine("windows_desktop_rtx4070")
    speed = predict(report, DecodeCost(5_000_000_000, 0), kind="gpu", device_name="NVIDIA GeForce RTX 4070",
                    threads=8, accelerated_share=1.0)
    assert speed.tokens_per_s == pytest.approx(1 / (5e9 / (504e9 * ACCELERATOR_EFFICIENCY) + TOKEN_OVERHEAD_S))
    assert "published 504 GB/s" in speed.basis and "not yet measured" in speed.basis and not speed.measured


def test_an_unknown_gpu_is_a_named_guess_and_a_split_adds_the_cpus_share() -> None:
    report = machine("windows_desktop_rtx4070")
    whole = predict(report, DecodeCost(5_000_000_000, 0), kind="gpu", device_name="Mystery GPU", threads=8,
                    accelerated_share=1.0)
    split = predict(report, DecodeCost(5_000_000_000, 0), kind="gpu", device_name="Mystery GPU", threads=8,
                    accelerated_share=0.5)
    assert whole.basis.startswith("a guess: 200 GB/s for the graphics memory")
    assert split.tokens_per_s < whole.tokens_per_s and "estimated: no model measured" in split.basis


@pytest.mark.parametrize("words, share", [
    ("30.5B (3.3B active)", 3.3 / 30.5), ("21B (3.6B active)", 3.6 / 21), ("30B-A3B", 0.1),
    ("8.2B", 1.0), ("3.9B + 0.4B image encoder", 1.0), ("", 1.0),
])
def test_a_mixture_of_experts_reads_only_its_active_share(words: str, share: float) -> None:
    assert active_share(words) == pytest.approx(share)


def test_the_cost_counts_the_cache_at_a_typical_context() -> None:
    cost = decode_cost(1000, kv_cache_bytes=8192 * 100, context_length=8192, vocab=10, active_share=0.5)
    assert (cost.weights, cost.kv_cache, cost.bytes_read) == (500, 1024 * 100, 500 + 1024 * 100)


@pytest.mark.parametrize("rate, verdict, summary", [
    (25.0, Verdict.RUNS_WELL, "Runs well: about 25 tokens/s here"),
    (6.0, Verdict.USABLE, "Usable: about 6 tokens/s here, below the 10 tokens/s that read comfortably"),
    (2.0, Verdict.RUNS_SLOWLY, "Slow: about 2 tokens/s here, slow for chat"),
    (0.6, Verdict.RUNS_SLOWLY, "Slow: about 0.6 tokens/s here, slow for chat"),
])
def test_the_verdict_words_carry_the_number_and_the_reason(rate: float, verdict: Verdict, summary: str) -> None:
    fit = estimate_fit(machine("linux_vm"), GEMMA2_2B, context_length=4096, steady=True)

    judged = with_speed(fit, SpeedEstimate(rate, "measured: x", True), comfortable=10.0)

    assert (judged.verdict, judged.summary) == (verdict, summary)
    assert judged.lines[0].startswith(f"Speed: {judged.speed.words} on the CPU")  # type: ignore[union-attr]
    assert judged.lines[1] == "How it was judged: measured: x"


def test_a_model_that_will_not_fit_stays_so_whatever_its_speed() -> None:
    small = dataclasses.replace(machine("linux_vm"), ram=RamInfo(4 * _GIB, 4 * _GIB))
    fit = estimate_fit(small, LLAMA31_8B, context_length=8192, steady=True)
    assert with_speed(fit, SpeedEstimate(50.0, "x", True), 10.0).verdict == Verdict.WONT_FIT


def test_the_steady_verdict_counts_the_machine_not_the_free_memory_and_says_the_sum() -> None:
    """Issue 37: the verdict flipped with momentary free memory; now it counts the RAM less the
    system's share, says that sum, and says what other programs use beside it."""
    fits = []
    for free in (20, 3):
        report = dataclasses.replace(machine("linux_vm"), ram=RamInfo(24 * _GIB, free * _GIB))
        fit = estimate_fit(report, LLAMA31_8B, context_length=8192, steady=True)
        fits.append(with_others_now(fit, report, free * _GIB, kestrel_holds=1 * _GIB))
    busy_free, busy = fits[1].lines[-1], fits[1]
    assert fits[0].verdict == busy.verdict == Verdict.RUNS_WELL and fits[0].summary == busy.summary
    assert "Memory counted: 21.0 GB of your 24.0 GB (3.0 GB kept for the system)" in busy.lines
    assert fits[0].lines[-1] == "Other programs use 3.0 GB right now"
    assert busy_free.startswith("Other programs use 20.0 GB right now; close some of them before loading it")
    assert busy.others_now == 20 * _GIB


def test_without_steady_the_free_memory_counts_as_before() -> None:
    report = dataclasses.replace(machine("linux_vm"), ram=RamInfo(24 * _GIB, 3 * _GIB))
    assert estimate_fit(report, LLAMA31_8B, context_length=8192).verdict == Verdict.WONT_FIT
