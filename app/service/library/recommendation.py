"""Which catalog model to recommend on this machine, and the one sentence that says why."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from app.hardware.fit import FitEstimate, Verdict
from app.hardware.report import HardwareReport
from app.library.model_files.model_purpose import ModelPurpose
from app.service.events import CatalogRow

_GIB = 1024**3
# The context a recommended model must leave room for to count as running well here: below
# this a chat with a pasted page or an attached file runs out of room after a few turns.
ROOM_CONTEXT = 8192
# A first model offered may take at most this share of the memory it shares with everything else
# (RAM, an integrated GPU's or Apple silicon's one memory), leaving the rest to the browser and all: an
# 18.6 GB model offered on a 24 GB laptop "fits", and leaves it swapping once a few tabs open.
SHARED_MEMORY_SHARE = 0.6
# The contexts the reason names, largest first ("with room for a 32k context").
_NAMED_CONTEXTS = (131072, 65536, 32768, 16384, 8192)


@dataclass(frozen=True)
class Recommendation:
    """The catalog row on offer and why it was chosen, in one sentence for the user."""

    row: CatalogRow
    reason: str


def recommend(rows: Sequence[CatalogRow], report: HardwareReport | None) -> Recommendation | None:
    """The first-run offer and "Get a model"'s pick: the best model that runs at a comfortable speed
    here (its verdict RUNS_WELL: predicted at the comfortable_tokens_per_s setting or more), with room
    for ROOM_CONTEXT tokens, taking at most 60% of the memory it shares with the rest of the machine;
    the largest such model the catalog marks recommended (bigger answers better, and the catalog lists
    one per tier), else the largest such chat model of the catalog. Failing that, the fastest chat
    model that fits, with its verdict's words. Without a fit (no hardware report yet), the catalog's
    first recommended model. Installed models and models that cannot chat are never offered."""
    open_rows = [r for r in rows if r.installed_id is None and r.entry.instruct
                 and r.entry.purpose is ModelPurpose.CHAT]
    marked = [r for r in open_rows if r.entry.recommended]
    # A neural processor no catalog model would run on is named in the reason (_said).
    unused_npu = report.npus[0].name if report is not None and report.npus and not any(
        r.fit is not None and r.fit.device_kind == "npu" for r in rows) else None
    if marked and all(r.fit is None for r in open_rows):
        return Recommendation(marked[0], "Whether it fits this machine is not known yet.")
    comfortable = [r for r in open_rows if _runs_well(r.fit) and _room(r.fit) >= ROOM_CONTEXT
                   and _leaves_room(r, report)]
    pool = [r for r in comfortable if r.entry.recommended] or comfortable
    if pool:
        best = max(pool, key=lambda r: r.entry.size or 0)
        return _said(best, fits_reason(best.fit, report), unused_npu)
    fitting = [r for r in open_rows if r.fit is not None and r.fit.verdict != Verdict.WONT_FIT
               and _leaves_room(r, report)]
    if fitting:
        fastest = max(fitting, key=_pace)
        return _said(fastest, _slow_reason(fastest.fit), unused_npu)
    unknown = [r for r in marked if r.fit is None]
    if unknown:
        return Recommendation(unknown[0], "Whether it fits this machine is not known yet.")
    return None


def _pace(row: CatalogRow) -> float:
    """Predicted tokens/s; without a prediction, smaller is taken as faster."""
    fit = row.fit
    if fit is not None and fit.speed is not None:
        return fit.speed.tokens_per_s
    return -float(row.entry.size or 0)


def _said(row: CatalogRow, reason: str, unused_npu: str | None) -> Recommendation:
    """The recommendation with its reason, and a word for the machine's neural processor when no
    catalog model would run on it (by the fit verdicts): the owner of an "AI PC" would otherwise
    wonder why the NPU never comes up."""
    if unused_npu is not None:
        reason += f" No model in Kestrel's catalog runs on your NPU ({unused_npu}) yet."
    return Recommendation(row, reason)


def with_reason(recommendation: Recommendation | None) -> CatalogRow | None:
    """The recommended row carrying its reason, as the front ends show it."""
    if recommendation is None:
        return None
    return dataclasses.replace(recommendation.row, reason=recommendation.reason)


def fits_reason(fit: FitEstimate | None, report: HardwareReport | None) -> str:
    """"About 25 tokens/s here; fits in the 21 GB of your 24 GB of memory that Kestrel counts on, with
    room for a 32k context": its speed, the memory it was counted against and the context left."""
    if fit is None:
        return "Whether it fits this machine is not known yet."
    where = _where(fit, report)
    room = _room(fit)
    named = next((c for c in _NAMED_CONTEXTS if room >= c), None)
    speed = f"{fit.speed.words[0].upper()}{fit.speed.words[1:]}; fits" if fit.speed is not None else "Fits"
    if named is None:
        return f"{speed} {where}, with room for {room:,} tokens of context."
    article = "an" if str(named // 1024).startswith("8") else "a"
    return f"{speed} {where} with room for {article} {named // 1024}k context."


def _where(fit: FitEstimate, report: HardwareReport | None) -> str:
    """The memory the model goes to, as the user knows it: their RAM, their graphics card, their NPU."""
    if fit.device_kind == "cpu":
        total = report.ram.total if report is not None and report.ram is not None else None
        if not total:
            return "in this computer's memory"
        counted = fit.available
        if counted is not None and counted < total:
            # The sum the verdict made: the machine's memory less what the system keeps (whole_machine).
            return f"in the {_whole_gb(counted)} of your {_whole_gb(total)} of memory that Kestrel counts on,"
        return f"your {_whole_gb(total)} of memory"
    name = fit.device_name or ("graphics card" if fit.device_kind == "gpu" else "NPU")
    if fit.device_kind == "npu":
        return f"your NPU ({name})"
    size, shared = _device_memory(fit, report)
    if 0 < fit.accelerated_share < 1:
        ram = report.ram.total if report is not None and report.ram is not None else None
        card = f"your {_whole_gb(size)} {name}" if size else f"your {name}"
        return f"across {card} and your {_whole_gb(ram)} of memory" if ram else f"across {card} and memory"
    if size and shared:
        return f"the {_whole_gb(size)} your {name} can use"
    return f"your {_whole_gb(size)} graphics card ({name})" if size else f"your graphics card ({name})"


def _device_memory(fit: FitEstimate, report: HardwareReport | None) -> tuple[int | None, bool]:
    """The memory of the device the model goes to, and whether it is shared with the processor
    (an integrated GPU: "graphics card" would be the wrong word)."""
    if report is None:
        return None, False
    if report.llama is not None:
        for device in report.llama.devices:
            if fit.device_name in (device.name, device.description) and device.memory_total:
                # Apple silicon's GPU shares the one memory too, though llama.cpp calls it a GPU.
                apple = report.os is not None and report.os.system == "Darwin"
                return device.memory_total, device.kind == "igpu" or apple
    for gpu in report.gpus:
        if gpu.name == fit.device_name and gpu.dedicated_memory:
            return gpu.dedicated_memory, bool(gpu.integrated)
    return None, False


def _leaves_room(row: CatalogRow, report: HardwareReport | None) -> bool:
    """Whether the model takes at most SHARED_MEMORY_SHARE of the memory it shares with the rest of
    the machine (a dedicated graphics card's memory is the model's to fill: the verdict judges it)."""
    fit, size = row.fit, row.entry.size
    if fit is None or not size:
        return True
    if fit.device_kind == "cpu":
        total = report.ram.total if report is not None and report.ram is not None else None
    else:
        total, shared = _device_memory(fit, report)
        if not shared:
            return True
        if 0 < fit.accelerated_share < 1:
            return False  # split between an integrated GPU and the CPU: one memory, squeezed from both sides
        # A shared memory is never more than the machine's RAM, whatever the GPU says it may address.
        ram = report.ram.total if report is not None and report.ram is not None else None
        total = min(total, ram) if total and ram else total or ram
    return not total or size <= total * SHARED_MEMORY_SHARE


def _slow_reason(fit: FitEstimate | None) -> str:
    """None runs at a comfortable speed: the fastest one that fits, and its verdict says how it will run."""
    summary = fit.summary if fit is not None else ""
    return ("The fastest model that fits here, though none reads comfortably: " + summary[0].lower()
            + summary[1:] + "." if summary else "The fastest model that fits here.")


def _runs_well(fit: FitEstimate | None) -> bool:
    return fit is not None and fit.verdict == Verdict.RUNS_WELL


def _room(fit: FitEstimate | None) -> int:
    """The longest context that fits (the estimate's context when the longest is not known)."""
    if fit is None:
        return 0
    return fit.max_context if fit.max_context is not None else fit.context_length


def _whole_gb(size: int | None) -> str:
    return f"{round((size or 0) / _GIB)} GB"
