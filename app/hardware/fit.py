"""Will it fit? A model's memory need against what its placement would use, as a plain verdict.

Pure arithmetic over a HardwareReport and a model's numbers: place() says where the model
would go, and this module says how well it would run there, with the numbers behind the
verdict and the longest context that still fits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from app.hardware.memory import (
    F16, ModelShape, llama_compute_bytes, memory_needed, onnx_compute_bytes,
)
from app.hardware.placement import place
from app.hardware.placement_fit import fit_layers, gb, llama_gpu_budgets, margin, onnx_budget
from app.core.settings import DevicePreference
from app.hardware.placement_types import ModelFacts, Placement, PlacementRefused, Runtime
from app.hardware.report import HardwareReport
from app.hardware.speed import SpeedEstimate

_MIB = 1024**2
# Memory the system itself must keep to go on working: a model that leaves less than
# this free will not load (or will make the machine swap until it is unusable).
OS_RESERVE = 256 * _MIB
# Context lengths are offered in steps of this many tokens (llama.cpp pads its cache so).
CONTEXT_STEP = 256
_CACHE_WORDS = {1: "8-bit", 2: "16-bit", 4: "32-bit"}


class Verdict(StrEnum):
    """Runs well / usable / slow / will not fit. Without a speed prediction (with_speed), RUNS_SLOWLY
    is the memory's word: only part of it on the GPU, a GPU passed over, or only just fitting."""

    RUNS_WELL = "runs_well"
    USABLE = "usable"
    RUNS_SLOWLY = "runs_slowly"
    WONT_FIT = "wont_fit"


# A model predicted at half the comfortable speed or more is usable: answers come at a pace one
# can wait for, if not read along with.
USABLE_SHARE = 0.5
# The memory the system and the desktop keep at rest, counted out of the total for a verdict that
# does not move with what other programs hold at the moment: 2 GB at least (a Linux desktop or
# Windows 11 at rest use 2-3 GB), an eighth of a larger machine.
SYSTEM_BASELINE = 2 * 1024**3
SYSTEM_SHARE = 0.125


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes a model needs: its weights, its KV cache and the runtime's working buffers."""

    weights: int
    kv_cache: int
    compute: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.compute


@dataclass(frozen=True)
class FitFacts(ModelFacts):
    """ModelFacts with what sizes the working buffers, read by app.library.fit_facts.

    trained_context is the longest context the model was made for (None: not stated);
    kv_element_bytes the cache's bytes per element. Placement sees the honest working
    buffers through memory_needed.
    """

    shape: ModelShape = ModelShape()
    trained_context: int | None = None
    kv_element_bytes: int = F16
    # A vision projector loaded beside the model: counted in file_size (weights), named apart.
    projector_bytes: int = 0
    # The bytes decoding a token reads, by number format, where the file's header lists them
    # (app.library.model_files.gguf_info); empty: the weights' bytes are all there is to go on.
    read_per_token: Mapping[str, int] = dataclasses.field(default_factory=dict, hash=False, compare=False)

    def compute_bytes(self, *, on_cpu: bool) -> int | None:
        """The working buffers on that device; None when the shape is not known."""
        if not self.shape.known:
            return None
        sizer = llama_compute_bytes if self.format == "gguf" else onnx_compute_bytes
        return sizer(self.shape, self.context_length, on_cpu=on_cpu)

    def memory_needed(self, *, on_cpu: bool) -> int:
        return memory_needed(self.file_size, self.kv_cache_bytes, on_cpu=on_cpu,
                             compute=self.compute_bytes(on_cpu=on_cpu))


@dataclass(frozen=True)
class FitEstimate:
    """How well a model would run here, in one line, with the numbers behind it."""

    verdict: Verdict
    summary: str
    context_length: int
    need: MemoryNeed
    device_kind: str
    device_name: str
    available: int | None
    freed_by_unloading: int
    max_context: int | None
    lines: tuple[str, ...]
    # The share of the model's bytes on the GPU or NPU (1.0 all of it, 0.0 on the CPU).
    accelerated_share: float = 0.0
    # How fast it should decode here (with_speed), and what other programs use now (with_others_now).
    speed: SpeedEstimate | None = None
    others_now: int | None = None


def estimate_fit(report: HardwareReport, model: ModelFacts, *, context_length: int,
                 preference: DevicePreference = DevicePreference.AUTO, loaded_bytes: int = 0,
                 steady: bool = False) -> FitEstimate:
    """The verdict for loading model at context_length with this device preference.

    loaded_bytes: the memory the model loaded now holds. Kestrel runs one model at a
    time, so loading this one gives it back; it is counted on the device this one would
    go to (the same placement rules put both there). steady: judge by the memory the
    machine has (whole_machine) rather than what is free this moment, so that the verdict
    does not move as other programs come and go; loaded_bytes then does not count.
    """
    facts = at_context(model, context_length)
    freed = 0 if steady else max(0, loaded_bytes)
    report = whole_machine(report) if steady else given_back(report, freed)
    try:
        placements = place(report, facts, preference)
    except PlacementRefused as refused:
        return _refused(facts, preference, refused, freed)
    return _Judge(report, facts, placements[0], preference, freed, steady).estimate()


def at_context(model: ModelFacts, context_length: int) -> ModelFacts:
    """The same model at another context length: the cache grows with it, token for token."""
    context = max(CONTEXT_STEP, context_length)
    trained = model.trained_context if isinstance(model, FitFacts) else None
    if trained:
        context = min(context, trained)
    if context == model.context_length:
        return model
    per_token = model.kv_cache_bytes / model.context_length if model.context_length else 0
    return dataclasses.replace(model, context_length=context, kv_cache_bytes=round(per_token * context))


def memory_need(model: ModelFacts, *, on_cpu: bool) -> MemoryNeed:
    """The three parts of model.memory_needed(on_cpu=...)."""
    total = model.memory_needed(on_cpu=on_cpu)
    weights = total - model.kv_cache_bytes - memory_needed(0, 0, on_cpu=on_cpu,
                                                            compute=_compute(model, on_cpu))
    return MemoryNeed(weights, model.kv_cache_bytes, total - weights - model.kv_cache_bytes)


def _compute(model: ModelFacts, on_cpu: bool) -> int | None:
    return model.compute_bytes(on_cpu=on_cpu) if isinstance(model, FitFacts) else None


def given_back(report: HardwareReport, freed: int) -> HardwareReport:
    """The report as it would be once the loaded model, holding `freed` bytes, is unloaded."""
    if not freed:
        return report
    ram = report.ram and dataclasses.replace(report.ram, available=min(report.ram.total,
                                                                       report.ram.available + freed))
    gpus = tuple(dataclasses.replace(g, free_memory=min(g.dedicated_memory or g.free_memory + freed,
                                                        g.free_memory + freed))
                 if g.free_memory else g for g in report.gpus)
    llama = report.llama
    if llama is not None:
        devices = tuple(dataclasses.replace(d, memory_free=min(d.memory_total, d.memory_free + freed))
                        if d.kind in ("gpu", "igpu") and d.memory_free else d for d in llama.devices)
        llama = dataclasses.replace(llama, devices=devices)
    return dataclasses.replace(report, ram=ram, gpus=gpus, llama=llama)


class _Judge:
    """The verdict for one placement: where the model goes, what is free there, what fits."""

    def __init__(self, report: HardwareReport, facts: ModelFacts, placement: Placement,
                 preference: DevicePreference, freed: int, steady: bool = False) -> None:
        self.report, self.facts, self.placement = report, facts, placement
        self.preference, self.freed, self.steady = preference, freed, steady
        self.ram = report.ram.available if report.ram else None
        self.on_cpu = placement.kind == "cpu"
        self.budget = self.ram if self.on_cpu else self._device_budget()

    def estimate(self) -> FitEstimate:
        need = memory_need(self.facts, on_cpu=self.on_cpu)
        verdict, summary = self._verdict()
        maximum = self._max_context()
        return FitEstimate(
            verdict=verdict, summary=summary, context_length=self.facts.context_length, need=need,
            device_kind=self.placement.kind, device_name=self.placement.device_name,
            available=self.budget, freed_by_unloading=self.freed, max_context=maximum,
            lines=self._lines(need, maximum), accelerated_share=self._accelerated_share(),
        )

    def _accelerated_share(self) -> float:
        if self.on_cpu:
            return 0.0
        if self.partial and self.facts.layers:
            return self.placement.gpu_layers / self.facts.layers
        return 1.0

    # --- where it goes and what is free there ---

    def _device_budget(self) -> int | None:
        placement = self.placement
        if placement.backend == Runtime.LLAMA_CPP:
            budgets = llama_gpu_budgets(self.report)
            return next((b.budget for b in budgets if b.name == placement.device_name), None)
        if placement.ep_device_index is None:
            return None
        return onnx_budget(self.report, self.report.ep_devices[placement.ep_device_index])[0]

    @property
    def partial(self) -> bool:
        return self.placement.backend == Runtime.LLAMA_CPP and self.placement.gpu_layers > 0

    def _ram_left_for(self, facts: ModelFacts) -> int | None:
        """RAM the model would still have free once loaded; None when RAM is not known."""
        if self.ram is None:
            return None
        need = facts.memory_needed(on_cpu=True)
        if self.partial and self.budget is not None and facts.layers:
            # The GPU holds its share of the weights and cache; the rest stays in RAM.
            layers = fit_layers(facts, self.budget)[0]
            share = 1.0 if layers == -1 else layers / facts.layers
            need -= int((facts.file_size + facts.kv_cache_bytes) * share)
        return self.ram - need

    def _accelerator_skipped(self) -> bool:
        """Whether a GPU or NPU that could run this kind of model was passed over for the CPU."""
        if self.preference == "cpu":
            return False
        if self.facts.format == "gguf":
            return bool(llama_gpu_budgets(self.report))
        targets = {t.provider for t in self.facts.onnx_targets}
        return any(d.kind != "cpu" and d.provider in targets for d in self.report.ep_devices)

    # --- the verdict ---

    def _verdict(self) -> tuple[Verdict, str]:
        placement = self.placement
        where = f"{placement.kind.upper()} ({placement.device_name})"
        left = self._ram_left_for(self.facts)
        if left is not None and left < OS_RESERVE and (self.on_cpu or self.partial):
            need = self.ram - left if self.ram is not None else 0
            return Verdict.WONT_FIT, f"Will not fit: needs {gb(need)}, {self._ram_words()}"
        if self.partial:
            return Verdict.RUNS_SLOWLY, (f"Runs slowly: {placement.gpu_layers} of {self.facts.layers} layers "
                                         f"on the {where}, the rest on the CPU")
        if not self.on_cpu:
            return Verdict.RUNS_WELL, f"Runs well on the {where}"
        if self._accelerator_skipped():
            return Verdict.RUNS_SLOWLY, "Runs slowly: CPU only, " + _cpu_why(placement.reason)
        if left is not None and self.ram is not None and left < margin(self.ram):
            return Verdict.RUNS_SLOWLY, (f"Runs slowly: only just fits in memory "
                                         f"({gb(self.ram - left)}, {self._ram_words()})")
        return Verdict.RUNS_WELL, f"Runs well on the {where}"

    # --- the longest context ---

    def _fits(self, context: int) -> bool:
        facts = at_context(self.facts, context)
        if self.on_cpu or self.partial:
            left = self._ram_left_for(facts)
            return left is None or left >= OS_RESERVE
        if self.budget is None:
            return True
        if self.placement.backend == Runtime.LLAMA_CPP:
            return fit_layers(facts, self.budget)[0] == -1
        return facts.memory_needed(on_cpu=False) + margin(self.budget) <= self.budget

    def _max_context(self) -> int | None:
        trained = self.facts.trained_context if isinstance(self.facts, FitFacts) else None
        if not trained or not self.facts.kv_cache_bytes:
            return None
        if self.budget is None and not (self.on_cpu and self.ram is not None):
            return None
        low, high = 0, trained // CONTEXT_STEP  # in steps; low always fits (0: none does)
        if trained < CONTEXT_STEP:
            return trained if self._fits(trained) else 0
        while low < high:
            middle = (low + high + 1) // 2
            if self._fits(middle * CONTEXT_STEP):
                low = middle
            else:
                high = middle - 1
        return low * CONTEXT_STEP

    # --- the numbers, in words ---

    def _lines(self, need: MemoryNeed, maximum: int | None) -> tuple[str, ...]:
        facts, placement = self.facts, self.placement
        cache = _CACHE_WORDS.get(facts.kv_element_bytes if isinstance(facts, FitFacts) else F16, "")
        lines = [
            f"Weights: {gb(need.weights)}{self._projector_words()}",
            f"KV cache: {gb(need.kv_cache)} for {facts.context_length:,} tokens ({cache} cache)",
            f"Working buffers: {gb(need.compute)}",
            f"Total: {gb(need.total)} on the {'CPU' if self.on_cpu else placement.kind.upper()}",
        ]
        if self.partial:
            lines.append(f"On the GPU: {placement.gpu_layers} of {facts.layers} layers, {gb(placement.memory_needed)}")
        lines.append(self._free_line())
        if self.freed:
            lines.append(f"Unloading the model loaded now gives back {gb(self.freed)} (counted above)")
        lines.append(f"Where: {placement.reason}")
        if maximum is not None:
            lines.append(f"Longest context that fits: {maximum:,} tokens" if maximum else
                         "No context length fits in the memory that is free")
        return tuple(lines)

    def _projector_words(self) -> str:
        projector = self.facts.projector_bytes if isinstance(self.facts, FitFacts) else 0
        return f" (the vision projector's {gb(projector)} among them)" if projector else ""

    def _ram_words(self) -> str:
        """The RAM counted, in words that match the sum: "21.0 GB free", or the steady count's
        "21.0 GB of your 24 GB (3.0 GB kept for the system)"."""
        ram = self.ram or 0
        total = self.report.ram.total if self.report.ram is not None else 0
        if self.steady and total:
            return f"{gb(ram)} of your {gb(total)} ({gb(total - ram)} kept for the system)"
        return f"{gb(ram)} free"

    def _free_line(self) -> str:
        if self.on_cpu:
            if self.ram is None:
                return "Free memory: not known"
            return f"Memory counted: {self._ram_words()}" if self.steady else f"Free memory: {gb(self.ram)}"
        where = f"{self.placement.device_name}"
        text = f"Free on {where}: {gb(self.budget)}" if self.budget is not None else f"Free on {where}: not known"
        if self.partial and self.ram is not None:
            text += f"; free memory for the rest: {gb(self.ram)}"
        return text


def whole_machine(report: HardwareReport) -> HardwareReport:
    """The report as a steady verdict counts it: all the memory but the system's share (system_share)
    free, every GPU's memory free, whatever other programs hold at the moment (said beside the
    verdict instead: with_others_now)."""
    ram = report.ram and dataclasses.replace(report.ram, available=report.ram.total - system_share(report.ram.total))
    gpus = tuple(dataclasses.replace(g, free_memory=g.dedicated_memory) if g.free_memory and g.dedicated_memory
                 else g for g in report.gpus)
    llama = report.llama
    if llama is not None:
        llama = dataclasses.replace(llama, devices=tuple(
            dataclasses.replace(d, memory_free=d.memory_total) if d.kind in ("gpu", "igpu") else d
            for d in llama.devices))
    return dataclasses.replace(report, ram=ram, gpus=gpus, llama=llama)


def system_share(total: int) -> int:
    """The memory counted for the system and the desktop out of `total`."""
    return max(SYSTEM_BASELINE, int(total * SYSTEM_SHARE))


def with_speed(fit: FitEstimate, speed: SpeedEstimate, comfortable: float) -> FitEstimate:
    """The verdict by speed: runs well at `comfortable` tokens/s or more, usable from half that, slow
    below; a model that will not fit stays so. The memory's own words stay among the lines."""
    if fit.verdict == Verdict.WONT_FIT:
        return dataclasses.replace(fit, speed=speed)
    rate = speed.tokens_per_s
    if rate >= comfortable:
        verdict, summary = Verdict.RUNS_WELL, f"Runs well: {speed.words}"
    elif rate >= comfortable * USABLE_SHARE:
        verdict, summary = Verdict.USABLE, f"Usable: {speed.words}, below the {comfortable:g} tokens/s that read comfortably"
    else:
        verdict, summary = Verdict.RUNS_SLOWLY, f"Slow: {speed.words}, slow for chat"
    where = "the CPU" if fit.device_kind == "cpu" else f"the {fit.device_kind.upper()} ({fit.device_name})"
    if 0 < fit.accelerated_share < 1:
        where = f"{fit.device_name} and the CPU"
    lines = (f"Speed: {speed.words} on {where}", f"How it was judged: {speed.basis}", f"Memory: {fit.summary}",
             *fit.lines)
    return dataclasses.replace(fit, verdict=verdict, summary=summary, lines=lines, speed=speed)


def with_others_now(fit: FitEstimate, report: HardwareReport, available_now: int, kestrel_holds: int) -> FitEstimate:
    """The verdict with what other programs use right now said beside it (never changing it), and
    whether they leave room to load it now."""
    if report.ram is None:
        return fit
    others = max(0, report.ram.total - available_now - kestrel_holds)
    line = f"Other programs use {gb(others)} right now"
    need = fit.need.total if fit.device_kind == "cpu" else 0
    if need and available_now + kestrel_holds - need < OS_RESERVE and fit.verdict != Verdict.WONT_FIT:
        line += f"; close some of them before loading it ({gb(need)} needed, {gb(available_now + kestrel_holds)} free)"
    return dataclasses.replace(fit, others_now=others, lines=(*fit.lines, line))


def _cpu_why(reason: str) -> str:
    """The placement's reason for the CPU, without its "CPU: " label."""
    return reason.removeprefix("CPU: ").split("; it needs about")[0]


def _refused(facts: ModelFacts, preference: DevicePreference, refused: PlacementRefused,
             freed: int) -> FitEstimate:
    kind = str(preference) if preference != DevicePreference.AUTO else "cpu"
    need = memory_need(facts, on_cpu=kind == "cpu")
    return FitEstimate(
        verdict=Verdict.WONT_FIT, summary=f"Will not run on the {kind.upper()} you chose",
        context_length=facts.context_length, need=need, device_kind=kind, device_name="",
        available=None, freed_by_unloading=freed, max_context=None,
        lines=(f"Needs: {gb(need.total)}", refused.reason),
    )


__all__ = ["FitEstimate", "FitFacts", "MemoryNeed", "Verdict", "at_context", "estimate_fit",
           "memory_need", "system_share", "whole_machine", "with_others_now", "with_speed"]
