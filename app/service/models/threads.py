"""How many CPU threads the engine decodes with: chosen from what is free, stepped down
when decoding collapses, remembered per model and machine.

llama.cpp's threads meet at a barrier after every step of every token, so one thread
that another busy program holds off its core stalls all of them: on a 2-core machine
with one unrelated busy process, two threads decoded 0.5-0.9 tokens/s where one thread
decoded 29.6. So the count follows what is free when an answer starts (the cores other
programs keep busy, measured from the system's CPU times less Kestrel's own), and an
answer that ran far slower than this model has run on this machine lowers the count for
the next ones. The step-down is remembered (in threads.json beside the settings) and
forgotten after STEP_DOWN_KEPT_S, so that a load that went away stops costing speed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from app.core.files import write_atomically

# An answer slower than this share of the best speed seen for its model collapsed.
COLLAPSE_SHARE = 0.5
# Answers shorter than this say little about speed.
MIN_TOKENS = 16
# Other programs using less than this many cores leave the machine "quiet".
QUIET_CORES = 0.5
STEP_DOWN_KEPT_S = 600.0


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    reason: str


class BusyMeter:
    """How many cores other programs kept busy since the last look (Kestrel's own
    processes left out)."""

    def __init__(self, ours: Callable[[], list[int]]) -> None:
        self._ours = ours  # the pids of Kestrel's processes (this one and its engine)
        # The first sample is taken now, so that the first answer's look spans the start and the model's
        # load: `kestrel chat` answers once, right after loading, and with no earlier sample it saw a busy
        # 2-core machine as quiet and decoded with 2 threads at 1.2 tokens/s where 1 thread gave 29.
        self._last: tuple[float, float, float] | None = self._sample()
        self.busy = 0.0

    def look(self) -> float:
        now = self._sample()
        if self._last is None:
            self._last = now
        elif now[0] - self._last[0] >= 0.2:
            wall = now[0] - self._last[0]
            others = (now[1] - self._last[1]) - (now[2] - self._last[2])
            self.busy = max(0.0, others / wall)
            self._last = now
        # Closer than 0.2 s to the last sample: too short to measure; the span keeps growing from it
        # (moving it on would let looks in quick succession never measure at all).
        return self.busy

    def _sample(self) -> tuple[float, float, float]:
        return time.monotonic(), _busy_seconds(), _cpu_seconds(self._ours())


class ThreadAdvisor:
    """Chooses each answer's threads; `record()` learns from each answer's stats."""

    def __init__(self, path: Path | None, *, cores: int, busy: Callable[[], float],
                 clock: Callable[[], float] = time.time) -> None:
        self._path = path
        self._cores = max(1, cores)
        self._busy = busy
        self._clock = clock
        self._models: dict[str, dict] = {}
        self.last: ThreadChoice | None = None

    def load(self) -> None:
        """Read what earlier runs learnt (file work: call it off the UI thread)."""
        self._models = _read(self._path) | self._models

    def choose(self, model: str, asked: int | None = None) -> ThreadChoice:
        """The threads for the next answer of `model` (a key from model_key())."""
        if asked:
            choice = ThreadChoice(asked, "as set in Settings")
        else:
            choice = self._from_free(self._busy())
            step = self._models.get(model, {}).get("step_down")
            if step and self._clock() - step["at"] < STEP_DOWN_KEPT_S and step["threads"] < choice.threads:
                choice = ThreadChoice(step["threads"], step["reason"])
        self.last = choice
        return choice

    def record(self, model: str, threads: int, tokens: int, tokens_per_s: float) -> None:
        """What an answer did; a collapse lowers the count for the next answers."""
        if tokens < MIN_TOKENS or threads < 1 or tokens_per_s <= 0:
            return
        entry = self._models.setdefault(model, {})
        best = entry.setdefault("best", {})
        fastest = max(best.values(), default=0.0)
        if threads > 1 and tokens_per_s < COLLAPSE_SHARE * fastest:
            entry["step_down"] = {"threads": threads - 1, "at": self._clock(), "reason": (
                f"{threads - 1} of {self._cores} cores: with {threads} an answer ran at {tokens_per_s:.1f} "
                f"tokens/s against {fastest:.1f} before (other programs compete for the cores)")}
        best[str(threads)] = max(best.get(str(threads), 0.0), tokens_per_s)

    def snapshot(self) -> bytes:
        """What was learnt, as threads.json holds it: taken where record() runs (the service's loop), so that
        the file work never reads the dict while an answer changes it."""
        return json.dumps(self._models, indent=1).encode("utf-8")

    def save(self, data: bytes | None = None) -> None:
        """Keep what was learnt (a snapshot(), or now) for the next run (file work: call it off the UI thread)."""
        if self._path is None:
            return
        try:
            write_atomically(self._path, self.snapshot() if data is None else data)
        except OSError:
            pass  # A speed hint is not worth a message; the next answer learns it again.

    def measured(self) -> dict[str, dict[str, dict[str, float]]]:
        """What answers measured here, as threads.json holds it ({model key: {"best": {threads: tokens/s}}}),
        with this run's answers included: the speed prediction calibrates on it."""
        return {key: {"best": dict(entry.get("best", {}))} for key, entry in self._models.items()}

    def measured_here(self) -> bool:
        """Whether any model's speed was measured on this CPU (a copied home folder's other CPUs left out)."""
        here = _this_cpu()
        return any(key.split("|")[-2:] == here and isinstance(entry, dict) and isinstance(entry.get("best"), dict)
                   and any(isinstance(rate, (int, float)) and rate > 0 for rate in entry["best"].values())
                   for key, entry in self._models.items())

    def _from_free(self, busy: float) -> ThreadChoice:
        if busy < QUIET_CORES:
            return ThreadChoice(self._cores, f"all {self._cores} physical cores: the machine is otherwise quiet")
        taken = min(self._cores - 1, max(1, round(busy)))
        return ThreadChoice(self._cores - taken, f"{self._cores - taken} of {self._cores} cores: other programs "
                                                 f"keep about {busy:.1f} busy")


def model_key(path: Path, size: int) -> str:
    """A model on this machine: its file and size, and the CPU it runs on."""
    return "|".join([path.name, str(size), *_this_cpu()])


def _this_cpu() -> list[str]:
    """The CPU part of a model key: its logical CPUs and physical cores."""
    return [str(os.cpu_count()), str(psutil.cpu_count(logical=False))]


def _read(path: Path | None) -> dict[str, dict]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _busy_seconds() -> float:
    """CPU seconds spent working, all cores together (guest time is already in user)."""
    times = psutil.cpu_times()
    return times.user + times.system + sum(getattr(times, name, 0.0) for name in ("nice", "irq", "softirq",
                                                                                   "steal", "interrupt", "dpc"))


def _cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total
