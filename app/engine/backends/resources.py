"""What a model takes to load: threads, and whether the memory it needs is free now.

The ModelFacts come from app/library/fit_facts.py, as placement's and the model
manager's do, so all of them count the same bytes.
"""

from __future__ import annotations

import os

import psutil

from app.engine.failures import NotEnoughMemory
from app.hardware.placement_types import ModelFacts


def default_threads() -> int:
    """The machine's physical cores: hyper-threads only slow llama.cpp's decoding."""
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def memory_problem(name: str, facts: ModelFacts, available: int | None = None) -> NotEnoughMemory | None:
    """What is short when the model will not fit in the memory that is free now for the CPU."""
    needed = facts.memory_needed(on_cpu=True)
    available = psutil.virtual_memory().available if available is None else available
    if needed <= available:
        return None
    return NotEnoughMemory(name, needed, available, facts.context_length)
