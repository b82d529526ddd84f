"""facts_for: the numbers "will it fit?" reads from a GGUF header or an ONNX folder, loading nothing."""

from __future__ import annotations

import dataclasses

import shutil
from pathlib import Path

import pytest

from app.hardware.fit import FitFacts
from app.hardware.memory import F16, F32
from app.library.fit_facts import facts_for
from app.library.model_files.gguf_info import ModelFileError, read_gguf_info

_MIB = 1024**2
TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"


def test_tiny_gguf(tiny_model: Path):
    facts = facts_for(tiny_model, 1024)
    info = read_gguf_info(tiny_model)
    assert isinstance(facts, FitFacts) and facts.format == "gguf"
    assert (facts.layers, facts.context_length, facts.trained_context) == (2, 1024, 2048)
    assert facts.file_size == tiny_model.stat().st_size
    head = info.embedding_length // info.head_count
    assert facts.kv_cache_bytes == 2 * 2 * (info.head_count_kv or info.head_count) * head * F16 * 1024
    # llama.cpp logged "CPU KV buffer size = 0.50 MiB" for this model at 2048 tokens.
    assert facts_for(tiny_model, 2048).kv_cache_bytes == 0.5 * _MIB
    assert facts.shape.vocab_size == 641 and facts.shape.head_count == info.head_count


def test_the_context_stays_within_what_the_model_was_made_for(tiny_model: Path):
    assert facts_for(tiny_model, 100_000).context_length == 2048
    assert facts_for(tiny_model, 10).context_length == 256


def test_starter_uses_its_own_head_size(small_real_model: Path):
    # Gemma 3 270M: 640 wide, 4 heads, but key_length 256. llama.cpp logged 6.00 MiB (3
    # global layers) + 30.00 MiB (15 sliding-window layers, full size with swa_full) at 2048.
    facts = facts_for(small_real_model, 2048)
    assert facts.kv_cache_bytes == 36 * _MIB
    assert facts.trained_context == 32_768 and facts.layers == 18
    assert facts.shape.vocab_size == 262_144 and facts.shape.embedding_length == 640


def test_tiny_onnx_folder():
    facts = facts_for(TINY_ONNX, 512)
    assert facts.format == "onnx" and facts.onnx_targets == ()
    assert (facts.layers, facts.context_length, facts.trained_context) == (2, 512, 2048)
    # 2 layers x (K and V) x 2 KV heads x head size 16, float32 as the CPU export's graph says.
    assert facts.kv_cache_bytes == 2 * 2 * 2 * 16 * F32 * 512 and facts.kv_element_bytes == F32
    assert facts.shape.vocab_size == 853 and facts.shape.embedding_length == 64


def test_onnx_cache_type_from_the_graph(tmp_path: Path):
    folder = Path(shutil.copytree(TINY_ONNX, tmp_path / "fp16 cache"))
    graph = folder / "model.onnx"
    # past_key_values.0.key's elem_type 1 (FLOAT) -> 10 (FLOAT16), as a GPU export has it.
    graph.write_bytes(graph.read_bytes().replace(b"past_key_values.0.key\x12@\n>\x08\x01",
                                                 b"past_key_values.0.key\x12@\n>\x08\x0a"))
    facts = facts_for(folder, 512)
    assert facts.kv_cache_bytes == 2 * 2 * 2 * 16 * F16 * 512 and facts.kv_element_bytes == F16


def test_a_split_gguf_counts_every_shard(tiny_model: Path, tmp_path: Path):
    first = tmp_path / "model-00001-of-00002.gguf"
    shutil.copy(tiny_model, first)
    (tmp_path / "model-00002-of-00002.gguf").write_bytes(b"\0" * 4096)
    assert facts_for(first, 512).file_size == first.stat().st_size + 4096


def test_not_a_model(tmp_path: Path):
    bad = tmp_path / "notes.gguf"
    bad.write_text("hello")
    with pytest.raises(ModelFileError):
        facts_for(bad, 2048)


def test_a_catalog_entry_before_its_files_are_here():
    from app.library.catalog import load_catalog
    from app.library.fit_facts import facts_for_catalog

    entry = next(e for e in load_catalog() if e.id == "qwen2.5-coder-1.5b-instruct-q4_k_m")
    facts = facts_for_catalog(entry, 1 << 20)
    assert facts is not None and facts.file_size == entry.size
    assert facts.context_length == entry.context_length == 32768
    # 28 layers x (K and V) x 2 KV heads x head size 128 x F16, per token.
    assert facts.kv_cache_bytes == 28 * 2 * 2 * 128 * 2 * 32768
    assert facts.shape.head_count == 12 and facts.shape.vocab_size == 151936
    assert facts_for_catalog(dataclasses.replace(entry, shape=None), 4096).kv_cache_bytes == 0
    assert facts_for_catalog(dataclasses.replace(entry, size=None), 4096) is None
