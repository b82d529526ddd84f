"""Tests for app.library.model_files.gguf_info on real model files and on damaged copies of them.

The tiny_model and small_real_model fixtures come from tests/conftest.py.
"""

from __future__ import annotations

import os
import shutil
import struct
import tracemalloc
from pathlib import Path

import pytest

from app.library.model_files.ggml_types import GGML_TYPES
from app.library.model_files.gguf_header import GgufSkipped
from app.library.model_files.gguf_info import GgufInfo, ModelFileError, read_gguf_info
from tests.helpers.tiny_gguf import CHATML_TEMPLATE, build_tiny_gguf


def _copy_prefix(source: Path, target: Path, length: int) -> Path:
    with source.open("rb") as src, target.open("wb") as dst:
        remaining = length
        while remaining:
            block = src.read(min(remaining, 1 << 20))
            dst.write(block)
            remaining -= len(block)
    return target


def _read_error(path: Path) -> ModelFileError:
    with pytest.raises(ModelFileError) as caught:
        read_gguf_info(path)
    assert caught.value.path == path
    assert str(caught.value) == caught.value.message
    return caught.value


def _kv_string(key: str, value: str) -> bytes:
    key_bytes, value_bytes = key.encode(), value.encode()
    return (struct.pack("<Q", len(key_bytes)) + key_bytes + struct.pack("<I", 8)
            + struct.pack("<Q", len(value_bytes)) + value_bytes)


def _handmade_gguf(
    path: Path,
    tensors: list[tuple[str, list[int], int, int]],
    *,
    version: int = 3,
    extra_kv: bytes = b"",
    extra_kv_count: int = 0,
    data_bytes: int = 0,
) -> Path:
    """A GGUF written byte by byte, for headers the gguf package will not write."""
    header = b"GGUF" + struct.pack("<IQQ", version, len(tensors), 1 + extra_kv_count)
    header += _kv_string("general.architecture", "llama") + extra_kv
    for name, shape, type_id, offset in tensors:
        name_bytes = name.encode()
        header += struct.pack("<Q", len(name_bytes)) + name_bytes
        header += struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape)
        header += struct.pack("<IQ", type_id, offset)
    header += b"\0" * (-len(header) % 32)
    path.write_bytes(header + b"\0" * data_bytes)
    return path


class TestRealFiles:
    def test_tiny_model_facts(self, tiny_model: Path) -> None:
        info = read_gguf_info(tiny_model)

        assert isinstance(info, GgufInfo)
        assert (info.architecture, info.name, info.version) == ("llama", "kestrel-tiny", 3)
        assert (info.context_length, info.block_count, info.embedding_length) == (2048, 2, 64)
        assert (info.head_count, info.head_count_kv) == (4, 2)
        assert info.chat_template == CHATML_TEMPLATE
        assert (info.bos_token_id, info.eos_token_id) == (1, 2)
        assert info.tensor_count == 2 * 9 + 3
        assert info.file_size == tiny_model.stat().st_size
        assert info.data_start < info.data_end <= info.file_size

    def test_metadata_keeps_scalars_and_summarises_arrays(self, tiny_model: Path) -> None:
        metadata = read_gguf_info(tiny_model).metadata

        assert metadata["tokenizer.ggml.model"] == "llama"
        assert metadata["tokenizer.ggml.eot_token_id"] == 4
        assert metadata["tokenizer.ggml.add_bos_token"] is True
        tokens = metadata["tokenizer.ggml.tokens"]
        assert tokens == GgufSkipped("array[string]", metadata["llama.vocab_size"])
        assert metadata["tokenizer.ggml.scores"] == GgufSkipped("array[float32]", tokens.length)
        with pytest.raises(TypeError):
            metadata["general.name"] = "changed"  # type: ignore[index]

    def test_options_of_the_tiny_builder_show_up(self, tmp_path: Path) -> None:
        path = build_tiny_gguf(tmp_path / "t.gguf", chat_template=None, n_layers=3,
                               n_embd=32, n_ctx_train=4096, name="other")

        info = read_gguf_info(path)

        assert info.chat_template is None
        assert (info.block_count, info.embedding_length, info.context_length) == (3, 32, 4096)
        assert info.name == "other"

    def test_data_layout_agrees_with_the_reference_reader(self, tiny_model: Path) -> None:
        gguf = pytest.importorskip("gguf")
        reference = gguf.GGUFReader(tiny_model)
        last = max(reference.tensors, key=lambda t: t.data_offset)

        info = read_gguf_info(tiny_model)

        assert info.data_start == reference.data_offset
        assert info.data_end == last.data_offset + int(last.n_bytes)

    def test_starter_model_facts_match_llama_cpp(self, small_real_model: Path) -> None:
        llama_cpp = pytest.importorskip("llama_cpp")
        info = read_gguf_info(small_real_model)

        llm = llama_cpp.Llama(model_path=str(small_real_model), n_ctx=256, verbose=False)
        try:
            assert info.architecture == "gemma3"
            assert info.context_length == llama_cpp.llama_model_n_ctx_train(llm.model)
            assert info.block_count == llama_cpp.llama_model_n_layer(llm.model)
            assert info.embedding_length == llm.n_embd()
            assert info.head_count == llama_cpp.llama_model_n_head(llm.model)
            assert info.head_count_kv == llama_cpp.llama_model_n_head_kv(llm.model)
            assert info.bos_token_id == llm.token_bos()
            assert info.eos_token_id == llm.token_eos()
            assert info.name == llm.metadata["general.name"]
            # This build of Gemma 3 270M carries no chat template: Kestrel must
            # bring Gemma's own.
            assert info.chat_template is None
            assert "tokenizer.chat_template" not in llm.metadata
            assert info.data_end <= info.file_size
        finally:
            llm.close()

    def test_starter_model_reads_only_the_header(self, small_real_model: Path) -> None:
        tracemalloc.start()
        try:
            info = read_gguf_info(small_real_model)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

        assert info.file_size > 200 << 20
        assert peak < 16 << 20

    def test_bytes_after_the_data_are_allowed_and_not_read(self, tiny_model: Path,
                                                           tmp_path: Path) -> None:
        path = tmp_path / "padded.gguf"
        shutil.copyfile(tiny_model, path)
        # Sparse on the file systems tests run on, so this costs no disk space.
        os.truncate(path, 3 << 30)

        tracemalloc.start()
        try:
            info = read_gguf_info(path)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

        assert info.file_size == 3 << 30
        assert peak < 8 << 20

    def test_type_table_matches_gguf_package(self) -> None:
        gguf = pytest.importorskip("gguf")
        expected = {int(t): (t.name, *sizes) for t, sizes in gguf.GGML_QUANT_SIZES.items()}

        assert dict(GGML_TYPES) == expected


class TestTruncated:
    def test_tiny_cut_in_tensor_data(self, tiny_model: Path, tmp_path: Path) -> None:
        size = tiny_model.stat().st_size
        path = _copy_prefix(tiny_model, tmp_path / "cut.gguf", size * 2 // 3)

        error = _read_error(path)

        assert error.kind == "truncated"
        assert "incomplete" in error.message and "download it again" in error.message

    def test_starter_cut_in_tensor_data(self, small_real_model: Path, tmp_path: Path) -> None:
        path = _copy_prefix(small_real_model, tmp_path / "cut.gguf", 120 << 20)

        error = _read_error(path)

        assert error.kind == "truncated"
        assert "120 MB of 2" in error.message

    @pytest.mark.parametrize("length", [3, 10, 30, 5000])
    def test_tiny_cut_in_header(self, tiny_model: Path, tmp_path: Path, length: int) -> None:
        path = _copy_prefix(tiny_model, tmp_path / "cut.gguf", length)

        error = _read_error(path)

        assert error.kind == "truncated"
        assert "header" in error.message

    def test_starter_cut_in_header(self, small_real_model: Path, tmp_path: Path) -> None:
        # One megabyte ends inside the 262,144-entry vocabulary.
        path = _copy_prefix(small_real_model, tmp_path / "cut.gguf", 1 << 20)

        assert _read_error(path).kind == "truncated"

    def test_cut_after_header_before_any_data(self, tiny_model: Path, tmp_path: Path) -> None:
        info = read_gguf_info(tiny_model)
        path = _copy_prefix(tiny_model, tmp_path / "cut.gguf", info.data_start)

        assert _read_error(path).kind == "truncated"


class TestNotAModel:
    def test_missing(self, tmp_path: Path) -> None:
        error = _read_error(tmp_path / "gone.gguf")

        assert error.kind == "missing"
        assert "not found" in error.message

    def test_directory(self, tmp_path: Path) -> None:
        folder = tmp_path / "model.gguf"
        folder.mkdir()

        assert _read_error(folder).kind == "not_a_file"

    def test_empty(self, tmp_path: Path) -> None:
        path = tmp_path / "empty.gguf"
        path.touch()

        error = _read_error(path)

        assert error.kind == "empty"
        assert "download it again" in error.message

    def test_random_bytes(self, tmp_path: Path) -> None:
        path = tmp_path / "random.gguf"
        path.write_bytes(bytes(range(7, 256)) * 40)

        error = _read_error(path)

        assert error.kind == "not_gguf"
        assert "GGUF" in error.message

    def test_web_page_saved_as_model(self, tmp_path: Path) -> None:
        path = tmp_path / "model.gguf"
        path.write_text("<!DOCTYPE html><html><body>Not Found</body></html>")

        error = _read_error(path)

        assert error.kind == "not_gguf"
        assert "download probably failed" in error.message

    def test_magic_then_garbage(self, tmp_path: Path) -> None:
        path = tmp_path / "garbage.gguf"
        path.write_bytes(b"GGUF" + bytes((i * 37 + 11) % 251 for i in range(4000)))

        assert _read_error(path).kind == "corrupt"

    def test_valid_start_then_absurd_counts(self, tmp_path: Path) -> None:
        path = tmp_path / "counts.gguf"
        path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1 << 62, 5) + b"\0" * 100)

        assert _read_error(path).kind == "corrupt"

    def test_absurd_string_length_is_not_allocated(self, tmp_path: Path) -> None:
        path = tmp_path / "string.gguf"
        path.write_bytes(b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 60) + b"\0" * 100)

        assert _read_error(path).kind == "corrupt"

    def test_absurd_array_length(self, tmp_path: Path) -> None:
        kv = struct.pack("<Q", 3) + b"big" + struct.pack("<IIQ", 9, 4, 1 << 40)
        path = _handmade_gguf(tmp_path / "array.gguf", [], extra_kv=kv, extra_kv_count=1)

        assert _read_error(path).kind == "corrupt"

    @pytest.mark.parametrize("version", [1, 4])
    def test_unsupported_version(self, tmp_path: Path, version: int) -> None:
        path = _handmade_gguf(tmp_path / "v.gguf", [], version=version)

        error = _read_error(path)

        assert error.kind == "unsupported_version"
        assert str(version) in error.message

    def test_big_endian_file(self, tmp_path: Path) -> None:
        path = tmp_path / "be.gguf"
        path.write_bytes(b"GGUF" + struct.pack(">IQQ", 3, 0, 0))

        error = _read_error(path)

        assert error.kind == "unsupported_version"
        assert "big-endian" in error.message


class TestHandmadeHeaders:
    def test_minimal_valid_file(self, tmp_path: Path) -> None:
        path = _handmade_gguf(tmp_path / "ok.gguf", [("w", [64, 2], 0, 0)], data_bytes=512)

        info = read_gguf_info(path)

        assert info.architecture == "llama"
        assert info.name is None and info.context_length is None
        assert info.data_end == info.data_start + 512

    def test_quantized_sizes(self, tmp_path: Path) -> None:
        # Q4_K: 256 elements in 144 bytes; the second tensor starts on the next 32.
        tensors = [("a", [512, 3], 12, 0), ("b", [32], 8, 864)]
        path = _handmade_gguf(tmp_path / "q.gguf", tensors, data_bytes=864 + 34)

        info = read_gguf_info(path)

        assert info.data_end - info.data_start == 864 + 34

    def test_small_arrays_kept_and_long_texts_skipped(self, tmp_path: Path) -> None:
        key = b"llama.attention.head_count"
        per_layer = (struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 4, 3)
                     + struct.pack("<3I", 4, 8, 6))
        long_text = _kv_string("tokenizer.huggingface.json", "x" * (2 << 20))
        path = _handmade_gguf(tmp_path / "kv.gguf", [], extra_kv=per_layer + long_text,
                              extra_kv_count=2)

        info = read_gguf_info(path)

        assert info.metadata["llama.attention.head_count"] == (4, 8, 6)
        assert info.head_count == 8
        assert info.metadata["tokenizer.huggingface.json"] == GgufSkipped("string", 2 << 20)

    def test_unknown_tensor_type(self, tmp_path: Path) -> None:
        path = _handmade_gguf(tmp_path / "t.gguf", [("w", [32], 4, 0)], data_bytes=32)

        error = _read_error(path)

        assert error.kind == "unsupported_version"
        assert "ggml type 4" in error.message

    @pytest.mark.parametrize("tensor", [
        ("too_many_dims", [1, 1, 1, 1, 1], 0, 0),
        ("not_in_blocks", [100], 12, 0),
        ("misplaced", [8], 0, 64),
        ("huge", [1 << 40, 1 << 40], 0, 0),
    ])
    def test_impossible_tensor(self, tmp_path: Path,
                               tensor: tuple[str, list[int], int, int]) -> None:
        path = _handmade_gguf(tmp_path / "bad.gguf", [tensor], data_bytes=4096)

        error = _read_error(path)

        assert error.kind == "corrupt"
        assert tensor[0] in error.message

    def test_no_architecture(self, tmp_path: Path) -> None:
        path = tmp_path / "noarch.gguf"
        path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1)
                         + _kv_string("general.name", "x"))

        error = _read_error(path)

        assert error.kind == "corrupt"
        assert "architecture" in error.message

    def test_repeated_key(self, tmp_path: Path) -> None:
        kv = _kv_string("general.architecture", "llama")
        path = _handmade_gguf(tmp_path / "dup.gguf", [], extra_kv=kv, extra_kv_count=1)

        assert _read_error(path).kind == "corrupt"


def _kv_uint32(key: str, value: int) -> bytes:
    key_bytes = key.encode()
    return struct.pack("<Q", len(key_bytes)) + key_bytes + struct.pack("<II", 4, value)


class TestDamageReadsPlainly:
    """What a damaged header says: short, readable, counted in proper English (issue 9, defect 8)."""

    @pytest.mark.parametrize("key", ["llama.context_length", "llama.block_count",
                                     "llama.embedding_length", "llama.attention.head_count",
                                     "llama.attention.head_count_kv"])
    @pytest.mark.parametrize("value", [2**31, 2**32 - 1])
    def test_a_size_llama_cpp_cannot_hold_is_damage(self, tmp_path: Path, key: str, value: int) -> None:
        # llama.cpp keeps these in 32-bit signed integers: 2**31 and up turn negative there
        # ("Array length must be >= 0" from llama-cpp-python, or a "needs 131072 GB" message).
        path = _handmade_gguf(tmp_path / "big.gguf", [], extra_kv=_kv_uint32(key, value), extra_kv_count=1)

        error = _read_error(path)

        assert error.kind == "corrupt"
        assert f'"{key}"' in error.message and f"{value:,}" in error.message

    def test_a_model_without_layers_is_damage(self, tmp_path: Path) -> None:
        """Found by the robustness campaign: llama.cpp aborted the engine (exit -6) loading it."""
        path = _handmade_gguf(tmp_path / "no layers.gguf", [], extra_kv=_kv_uint32("llama.block_count", 0),
                              extra_kv_count=1)

        error = _read_error(path)

        assert error.kind == "corrupt" and "has no layers" in error.message

    def test_a_large_but_possible_context_is_kept(self, tmp_path: Path) -> None:
        path = _handmade_gguf(tmp_path / "long.gguf", [],
                              extra_kv=_kv_uint32("llama.context_length", 10_485_760), extra_kv_count=1)

        assert read_gguf_info(path).context_length == 10_485_760

    def test_a_damaged_key_name_is_quoted_short(self, tmp_path: Path) -> None:
        # The name's length was damaged: it runs on over the next settings' bytes.
        name = b"llama.context_length" + bytes(range(256)) * 170
        kv = struct.pack("<Q", len(name)) + name + struct.pack("<I", 0x2A2A2A2A)
        path = _handmade_gguf(tmp_path / "long name.gguf", [], extra_kv=kv, extra_kv_count=1)

        error = _read_error(path)

        assert error.kind == "corrupt"
        assert len(error.message) < 300, error.message
        assert error.message.isprintable() and "\\x" not in error.message
        assert '"llama.context_length…"' in error.message

    def test_a_name_that_is_all_noise_is_described(self, tmp_path: Path) -> None:
        name = bytes(range(1, 32)) * 1000
        kv = struct.pack("<Q", len(name)) + name + struct.pack("<I", 99)
        path = _handmade_gguf(tmp_path / "noise.gguf", [], extra_kv=kv, extra_kv_count=1)

        error = _read_error(path)

        assert len(error.message) < 300, error.message
        assert "with a name of 31,000 characters that is not text" in error.message

    def test_a_damaged_tensor_name_is_quoted_short(self, tmp_path: Path) -> None:
        name = "blk.0.attn_q.weight" + "\x00\x01" * 5000
        path = _handmade_gguf(tmp_path / "t.gguf", [(name, [8], 0, 64)], data_bytes=4096)

        error = _read_error(path)

        assert len(error.message) < 300 and error.message.isprintable()
        assert '"blk.0.attn_q.weight…"' in error.message

    def test_one_byte_short(self, tmp_path: Path) -> None:
        # 4,096 F32 values: 16 KB of data, and the file stops one byte before its end.
        path = _handmade_gguf(tmp_path / "short.gguf", [("w", [4096], 0, 0)], data_bytes=4096 * 4 - 1)

        error = _read_error(path)

        assert error.kind == "truncated"
        assert "1 byte short of" in error.message

    def test_a_file_of_one_byte(self, tmp_path: Path) -> None:
        path = tmp_path / "g.gguf"
        path.write_bytes(b"G")

        error = _read_error(path)

        assert error.kind == "truncated"
        assert "it ends after 1 byte," in error.message

    def test_counts_of_one_are_singular(self, tmp_path: Path) -> None:
        path = tmp_path / "counts.gguf"
        path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 1 << 30) + b"\0" * 64)

        assert "claims 1 tensor and 1,073,741,824 settings" in _read_error(path).message


class TestWhatATokenReads:
    """The bytes decoding a token reads, by number format (app/hardware/speed.py weighs them)."""

    def _model(self, path: Path, *, output: bool) -> Path:
        embedding = ("token_embd.weight", [32, 4], 1, 0)  # F16: 128 weights, 256 bytes
        matrix = [("output.weight", [32, 4], 8, 256)] if output else []  # Q8_0: 4 blocks of 34 bytes
        layer_at = 416 if output else 256
        layer = ("blk.0.ffn_up.weight", [32, 2], 6, layer_at)  # Q5_0: 2 blocks of 22 bytes
        return _handmade_gguf(path, [embedding, *matrix, layer], data_bytes=layer_at + 44)

    def test_a_token_reads_one_row_of_the_embedding_table_when_the_model_has_its_own_output(
            self, tmp_path: Path) -> None:
        info = read_gguf_info(self._model(tmp_path / "untied.gguf", output=True))
        assert dict(info.read_per_token) == {"Q8_0": 136, "Q5_0": 44}

    def test_a_model_whose_logits_reuse_the_embedding_table_reads_it_whole(self, tmp_path: Path) -> None:
        info = read_gguf_info(self._model(tmp_path / "tied.gguf", output=False))
        assert dict(info.read_per_token) == {"F16": 256, "Q5_0": 44}
