"""A model bigger than the free memory is refused with both sizes, before llama.cpp sees it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import psutil
from gguf import GGUFWriter

from app.engine.failures import NotEnoughMemory
from tests.helpers.engine import load_error

ROOT = Path(__file__).resolve().parents[2]


def sparse_giant(path: Path) -> Path:
    """A well-formed GGUF header whose one tensor is bigger than this machine's memory.

    The data is a sparse hole: the file claims its full size without using the disk.
    """
    elements = (psutil.virtual_memory().total * 2) // 4
    writer = GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_context_length(2048)
    writer.add_embedding_length(64)
    writer.add_head_count(4)
    writer.add_tensor_info("token_embd.weight", (elements,), np.dtype(np.float32), elements * 4)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    data_start = -(-path.stat().st_size // 32) * 32  # tensor data starts aligned
    os.truncate(path, data_start + elements * 4)
    return path


def test_the_engine_refuses_a_model_bigger_than_memory(tmp_path: Path) -> None:
    giant = sparse_giant(tmp_path / "giant model.gguf")

    error = load_error(giant)
    assert error.kind == "model_load" and isinstance(error.failure, NotEnoughMemory)
    assert "giant model.gguf needs about" in error.message and "GB is free" in error.message
    assert "smaller model" in error.message


def test_the_cli_says_so_and_exits_3(tmp_path: Path) -> None:
    giant = sparse_giant(tmp_path / "giant.gguf")
    result = subprocess.run([sys.executable, "-m", "app", "chat", "--model", str(giant), "hi"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 3
    assert "needs about" in result.stderr and "Traceback" not in result.stderr
