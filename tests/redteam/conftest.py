"""What the red-team campaign's files share: whether the whole campaign runs, or CI's sample."""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

FULL = os.environ.get("KESTREL_REDTEAM_FULL") == "1"
SEED = int(os.environ.get("KESTREL_REDTEAM_SEED", "35"))


def sampled(cases: Sequence[T], size: int) -> list[T]:
    """Every case when the full campaign runs; otherwise a seeded sample of size of them (CI)."""
    if FULL or len(cases) <= size:
        return list(cases)
    return random.Random(SEED).sample(list(cases), size)
