"""How fast a model will decode here, before it is downloaded: what a token costs against the device's rate.

Decoding one token reads every weight the token uses (all of a dense model; the active
experts' share of a mixture of experts) and the KV cache of the context so far, and does
about two operations per weight read. At one token at a time those operations are few per
byte, so the time per token is the bytes read against the rate the device reads them at,
plus a fixed cost per token (the engine's loop, sampling over the vocabulary, the pipe).
Operations per token are about two per weight, four or so per byte at 4-5 bits a weight: a
GPU's arithmetic (tens of TFLOPS) outruns its bandwidth a hundredfold at one token at a
time, so on a GPU or NPU the bytes alone set the pace.

On the CPU the rate is not in the HardwareReport, and for quantized weights the cores'
arithmetic (unpacking 4-bit blocks and the dot products) and the memory's bandwidth limit
together; measurements cannot tell them apart, so one effective rate in bytes per second
per thread stands for both. The bytes are those a token reads: every tensor but the token
embedding table (a token reads one row of it), each number format weighted by what its
kernel costs per byte (KERNEL_COST: Q5_0 unpacks a fifth bit and costs about twice as much
per byte here as Q4_K, Q6_K, Q4_0 or Q8_0). The rate comes from what this machine measured
(`Measured`: a model's bytes and the best tokens/s an answer of it reached, from the thread
advisor's threads.json), else from a documented figure per CPU class, said as "estimated".
On a GPU or NPU the rate is the device's memory bandwidth (a published figure for devices
named in _BANDWIDTH, else a conservative guess) at the share llama.cpp is seen to reach;
nothing of it has been measured on such a device here, and the words say so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.hardware.report import HardwareReport

_GB = 1e9
# The context a token is judged at: a few turns into a chat (the KV cache read grows with it).
TYPICAL_CONTEXT = 1024
# The fixed cost of a token, beside its bytes, and what each thread past the first adds to it (the
# threads meet after every operation): the tiny test GGUF (0.8 MB read a token, where that cost is most
# of its time) decoded through Kestrel's engine on the 2-core test VM at 0.15-0.17 ms a token on one
# thread and 0.20-0.29 ms on two, in two quiet runs (benchmarks/speed_prediction.py): the threads'
# meeting is the least steady part. Sampling reads every logit (VOCAB_ENTRY_S, a guess).
TOKEN_OVERHEAD_S = 0.00013
THREAD_SYNC_S = 0.00008
VOCAB_ENTRY_S = 3e-9
# ONNX Runtime GenAI's own per-token cost, and per thread past the first: the ONNX test model (1.5 MB
# read a token) decoded on the same VM at 0.12-0.14 ms a token on one thread and 0.13-0.19 ms on two.
ONNX_TOKEN_OVERHEAD_S = 0.00005
ONNX_THREAD_SYNC_S = 0.00005
# What a byte of each number format costs the CPU's kernels against Q4_K's, where it differs: measured
# on the test VM at one thread (CPU time a token) with Qwen2.5-Coder 0.5B and 1.5B requantized whole
# to Q4_0 and Q8_0 (57-65 ms per GB read, Q4_K/Q6_K 52) and the 0.5B's Q4_K_M (whose 896-wide rows
# fall back to Q5_0: 119 ms per GB of Q5_0). Q5_1 is taken to cost as Q5_0 (not measured); the
# IQ formats' grid lookups likely cost more too (not measured: 1.0 until they are).
KERNEL_COST = {"Q5_0": 2.2, "Q5_1": 2.2}
# Bytes per second one CPU thread decodes, by instruction set, when nothing was measured here.
# x86 with AVX2: the quiet 2-core AMD EPYC test VM decoded Qwen2.5-Coder 1.5B Q4_K_M (0.98 GB read a
# token) at 31.1 tokens/s on 2 threads, about 15 GB/s a thread, and 20.4 on one (20 GB/s)
# (docs/benchmarks.md, speed_prediction). ARM64 with dot products (Apple M, Snapdragon X): a guess,
# the same. Without AVX2 or dot products: a guess, a third of that.
CPU_THREAD_RATE = {"avx2": 15 * _GB, "arm_dotprod": 15 * _GB, "basic": 5 * _GB}
# The most all cores together read, where more threads stop helping: two channels of DDR4/DDR5 at
# about two thirds of their peak (a guess; a desktop's or laptop's usual memory).
CPU_MEMORY_CAP = 40 * _GB
# The share of a GPU's or NPU's memory bandwidth that decoding reaches (llama.cpp's CUDA and Metal
# decode is commonly reported at 60-75% of the published bandwidth; not measured here).
ACCELERATOR_EFFICIENCY = 0.6
# Published memory bandwidths (the vendors' specifications), matched by name.
_BANDWIDTH = (
    ("RTX 4090", 1008), ("RTX 4080", 717), ("RTX 4070 Ti", 504), ("RTX 4070", 504), ("RTX 4060 Ti", 288),
    ("RTX 4060", 272), ("RTX 3090", 936), ("RTX 3080", 760), ("RTX 3070", 448), ("RTX 3060", 360),
    ("M2 Pro", 200), ("M2 Max", 400), ("M3 Pro", 150), ("M3 Max", 400), ("M4 Pro", 273), ("M4 Max", 546),
    ("M1 Pro", 200), ("M1 Max", 400), ("Radeon 780M", 120), ("Radeon 890M", 120), ("Arc", 120),
)
# When the device is not named there: conservative guesses, said as guesses.
DISCRETE_GPU_GUESS = 200 * _GB
SHARED_MEMORY_GUESS = 60 * _GB
_ACTIVE = re.compile(r"(?:\(\s*|\bA)(\d+(?:\.\d+)?)\s*B\b(?:\s+active)?", re.IGNORECASE)
_TOTAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*B\b", re.IGNORECASE)


@dataclass(frozen=True)
class DecodeCost:
    """What one token costs: the weight bytes it reads (weighted by KERNEL_COST), the KV cache it reads
    at TYPICAL_CONTEXT, the vocabulary."""

    weights: int
    kv_cache: int
    vocab: int = 0
    onnx: bool = False

    @property
    def bytes_read(self) -> int:
        return self.weights + self.kv_cache


@dataclass(frozen=True)
class Measured:
    """A model decoded on this machine: its bytes and the best tokens/s an answer reached with `threads`.
    read_bytes: what a token of it reads, weighed as decode_cost weighs it (0: not known, as when its
    file is gone; its file's bytes stand in)."""

    name: str
    model_bytes: int
    tokens_per_s: float
    threads: int
    read_bytes: int = 0

    @property
    def token_bytes(self) -> int:
        return self.read_bytes or self.model_bytes


@dataclass(frozen=True)
class SpeedEstimate:
    """Tokens/s a model should decode at here, and where that number came from."""

    tokens_per_s: float
    basis: str  # "measured: …", "estimated: …", "a guess: …"
    measured: bool  # calibrated by this machine's own answers

    @property
    def words(self) -> str:
        """"about 25 tokens/s here", "about 2 tokens/s here (estimated)"."""
        rate = self.tokens_per_s
        number = f"{rate:.0f}" if rate >= 1.95 else f"{rate:.1f}"
        return f"about {number} tokens/s here" + ("" if self.measured else " (estimated)")


def decode_cost(weights: int, kv_cache_bytes: int, context_length: int, *, vocab: int = 0,
                active_share: float = 1.0, onnx: bool = False, read_per_token: Mapping[str, int] | None = None,
                embedding_share: float = 0.0) -> DecodeCost:
    """The cost of a token at TYPICAL_CONTEXT, from a model's bytes and its cache at context_length.
    read_per_token: the bytes a token reads by number format, where the file says; else `weights`
    less the embedding_share of them (embedding_table_share) a token does not read."""
    per_token = kv_cache_bytes / context_length if context_length else 0.0
    read = round(per_token * min(TYPICAL_CONTEXT, context_length or TYPICAL_CONTEXT))
    if read_per_token:
        weights = round(sum(size * KERNEL_COST.get(name, 1.0) for name, size in read_per_token.items()))
    else:
        weights = round(weights * (1 - max(0.0, min(0.5, embedding_share))))
    return DecodeCost(round(weights * max(0.01, min(1.0, active_share))), read, vocab, onnx)


def active_share(parameters: str) -> float:
    """The share of a mixture of experts' weights each token uses, from "30.5B (3.3B active)" or
    "30B-A3B" (a GGUF's size label); 1.0 for a dense model or words that do not say."""
    total, active = _TOTAL.match(parameters or ""), _ACTIVE.search(parameters or "")
    if total is None or active is None or active.start() == 0:
        return 1.0
    share = float(active.group(1)) / float(total.group(1))
    return share if 0 < share < 1 else 1.0


def embedding_table_share(parameters: str, vocab: int, embedding_length: int) -> float:
    """The share of a model's weights in its token embedding table (a token reads one row of it), from
    its size words ("1.5B") and its shape, before its file is here to say; 0.0 where they do not say.
    A model whose logits reuse that table reads it whole: the catalog does not say which do, so this
    counts every model as having an output matrix of its own (most do, and in the biggest the table
    is a few percent)."""
    total = _TOTAL.match(parameters or "")
    if total is None or not (vocab > 0 and embedding_length > 0):
        return 0.0
    share = vocab * embedding_length / (float(total.group(1)) * 1e9)
    return share if 0 < share < 0.5 else 0.0


def cpu_class(report: HardwareReport) -> str:
    """The CPU_THREAD_RATE row for this processor."""
    features = {f.upper() for f in (report.cpu.features if report.cpu else ())}
    if "AVX2" in features or any(f.startswith("AVX512") for f in features):
        return "avx2"
    if "DOTPROD" in features:
        return "arm_dotprod"
    return "basic"


def cpu_rate(report: HardwareReport, threads: int, measured: Sequence[Measured] = ()) -> tuple[float, str, bool]:
    """(bytes/s on `threads` threads, where the figure came from, whether it was measured here)."""
    cap = CPU_MEMORY_CAP
    best = _calibration(measured, threads)
    if best is not None:
        seconds = 1 / best.tokens_per_s - _overhead(best.threads)
        per_thread = best.token_bytes / seconds / best.threads
        rate = min(cap, per_thread * threads) if best.threads != threads else best.token_bytes / seconds
        return rate, (f"measured: {best.name} decoded at {best.tokens_per_s:.1f} tokens/s on "
                      f"{best.threads} thread{'s' if best.threads != 1 else ''} here"), True
    kind = cpu_class(report)
    rate = min(cap, CPU_THREAD_RATE[kind] * threads)
    return rate, (f"estimated: no model measured here yet; {CPU_THREAD_RATE[kind] / _GB:.0f} GB/s a thread "
                  f"for a {_CLASS_WORDS[kind]}, {threads} thread{'s' if threads != 1 else ''}"), False


_CLASS_WORDS = {"avx2": "processor with AVX2", "arm_dotprod": "64-bit ARM processor",
                "basic": "processor without AVX2"}


def _calibration(measured: Sequence[Measured], threads: int) -> Measured | None:
    """The measurement to calibrate on: models big enough that their bytes, not the fixed cost, set
    the pace (over 3/4 of the time per token), the biggest first, at these threads where measured."""
    useful = [m for m in measured if m.tokens_per_s > 0 and m.threads > 0
              and 1 / m.tokens_per_s > 4 * _overhead(m.threads)]
    if not useful:
        return None
    same = [m for m in useful if m.threads == threads]
    return max(same or useful, key=lambda m: (m.token_bytes, m.tokens_per_s))


def _overhead(threads: int, *, onnx: bool = False) -> float:
    """The fixed seconds of a token decoded by `threads` CPU threads, bytes aside."""
    base, sync = (ONNX_TOKEN_OVERHEAD_S, ONNX_THREAD_SYNC_S) if onnx else (TOKEN_OVERHEAD_S, THREAD_SYNC_S)
    return base + sync * max(0, threads - 1)


def accelerator_rate(report: HardwareReport, kind: str, name: str) -> tuple[float, str]:
    """(bytes/s decoding reaches on a GPU or NPU, where the figure came from): never measured here."""
    published = next((gbs for key, gbs in _BANDWIDTH if key.lower() in name.lower()), None)
    if published is not None:
        return (published * _GB * ACCELERATOR_EFFICIENCY,
                f"estimated: {name}'s published {published} GB/s at {ACCELERATOR_EFFICIENCY:.0%}; "
                "not yet measured on such a device")
    shared = kind == "npu" or _integrated(report, name)
    guess = SHARED_MEMORY_GUESS if shared else DISCRETE_GPU_GUESS
    what = "memory it shares with the processor" if shared else "graphics memory"
    return (guess * ACCELERATOR_EFFICIENCY,
            f"a guess: {guess / _GB:.0f} GB/s for the {what} of a device Kestrel does not know by name")


def _integrated(report: HardwareReport, name: str) -> bool:
    if report.llama is not None and any(name in (d.name, d.description) and d.kind == "igpu"
                                        for d in report.llama.devices):
        return True
    return any(g.name == name and bool(g.integrated) for g in report.gpus)


def predict(report: HardwareReport, cost: DecodeCost, *, kind: str, device_name: str, threads: int,
            accelerated_share: float = 0.0, measured: Sequence[Measured] = ()) -> SpeedEstimate:
    """Tokens/s for a model placed on `kind` (cpu, gpu, npu), `accelerated_share` of its bytes on the
    accelerator (1.0 all, 0.0 on the CPU), the rest decoded by `threads` CPU threads."""
    share = accelerated_share if kind != "cpu" else 0.0
    overhead = _overhead(max(1, threads) if share < 1 else 1, onnx=cost.onnx) + cost.vocab * VOCAB_ENTRY_S
    seconds, bases, measured_here = overhead, [], True
    if share > 0:
        rate, basis = accelerator_rate(report, kind, device_name)
        seconds += cost.bytes_read * share / rate
        bases.append(basis)
        measured_here = False
    if share < 1:
        rate, basis, was_measured = cpu_rate(report, max(1, threads), measured)
        seconds += cost.bytes_read * (1 - share) / rate
        bases.append(basis)
        measured_here = measured_here and was_measured
    return SpeedEstimate(1 / seconds, "; ".join(bases), measured_here)


__all__ = ["DecodeCost", "Measured", "SpeedEstimate", "TYPICAL_CONTEXT", "accelerator_rate", "active_share",
           "cpu_rate", "decode_cost", "embedding_table_share", "predict"]
