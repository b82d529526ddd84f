"""The memory a model needs, counted once for placement and for the engine's own check."""

from __future__ import annotations

import shutil
from pathlib import Path

from app.engine.backends.loading import model_facts
from app.core.units import human_size
from app.engine.failure_words import WINDOW, describe
from app.engine.failures import NotEnoughMemory
from app.engine.backends.resources import memory_problem
from app.library.fit_facts import facts_for, gguf_fit_facts, loaded_context, onnx_fit_facts
from app.library.model_files.onnx_graph import kv_element_bytes
from app.hardware.memory import F16, F32, ONNX_KV_FALLBACK
from app.library.model_files.gguf_info import read_gguf_info
from app.library.model_files.model_format import read_onnx_folder

TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"
_GIB = 1024**3


def _copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(TINY_ONNX, tmp_path / "tiny onnx"))


def test_the_cpu_export_keeps_a_float32_cache() -> None:
    # The model builder's CPU export (-p fp32 -e cpu): past_key_values.*.key are float32.
    assert kv_element_bytes(read_onnx_folder(TINY_ONNX)) == F32


def test_a_float16_graph_is_read_as_two_bytes(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    graph = folder / "model.onnx"
    # The input's TypeProto.Tensor.elem_type: 1 (FLOAT) -> 10 (FLOAT16), as a GPU export has it.
    data = graph.read_bytes()
    fp16 = data.replace(b"past_key_values.0.key\x12@\n>\x08\x01", b"past_key_values.0.key\x12@\n>\x08\x0a")
    assert fp16 != data
    graph.write_bytes(fp16)

    assert kv_element_bytes(read_onnx_folder(folder)) == F16


def test_an_unreadable_graph_counts_the_larger_cache(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    info = read_onnx_folder(folder)
    (folder / "model.onnx").write_bytes(b"not a model" * 10)
    assert kv_element_bytes(info) == ONNX_KV_FALLBACK == F32
    (folder / "model.onnx").write_bytes((TINY_ONNX / "model.onnx").read_bytes()[:3000])
    assert kv_element_bytes(info) == ONNX_KV_FALLBACK
    (folder / "model.onnx").unlink()
    assert kv_element_bytes(info) == ONNX_KV_FALLBACK


def test_onnx_facts_count_the_graphs_cache() -> None:
    facts = facts_for(TINY_ONNX, 512)
    # 2 layers x 2 KV heads x 16 dims x K and V x 4 bytes per token.
    assert (facts.format, facts.context_length, facts.layers) == ("onnx", 512, 2)
    assert facts.kv_cache_bytes == 2 * 2 * 512 * 2 * 16 * 4


def test_placement_and_the_backend_check_see_the_same_numbers(tiny_model: Path) -> None:
    folder = read_onnx_folder(TINY_ONNX)
    assert model_facts(str(TINY_ONNX), 100_000) == onnx_fit_facts(folder, 100_000, kv_element_bytes(folder))
    assert model_facts(str(tiny_model), 512) == gguf_fit_facts(read_gguf_info(tiny_model), 512)


def test_placement_counts_a_vision_projector_with_the_weights(tiny_model: Path, tmp_path: Path) -> None:
    projector = tmp_path / "mmproj-model-f16.gguf"
    projector.write_bytes(b"\0" * 12_345)
    alone = model_facts(str(tiny_model), 512)
    paired = model_facts(str(tiny_model), 512, str(projector))
    assert paired.file_size == alone.file_size + 12_345
    assert model_facts(str(tiny_model), 512, str(tmp_path / "gone.gguf")) == alone


def test_the_context_stays_within_what_the_model_was_made_for() -> None:
    assert loaded_context(100_000, 2048) == 2048
    assert loaded_context(10, 2048) == 256
    assert loaded_context(4096, None) == 4096


def test_a_model_too_big_for_the_free_memory_says_both_sizes() -> None:
    facts = facts_for(TINY_ONNX, 2048)

    assert memory_problem("tiny", facts, available=64 * _GIB) is None
    problem = memory_problem("tiny", facts, available=10 * 1000**2)
    assert problem == NotEnoughMemory("tiny", facts.memory_needed(on_cpu=True), 10 * 1000**2, 2048)
    message = describe(problem, WINDOW)
    assert message.startswith(f"tiny needs about {human_size(facts.memory_needed(on_cpu=True))} of memory with "
                              "a context of 2,048 tokens, and 10.0 MB is free")
    assert "smaller model" in message
