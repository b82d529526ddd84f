"""Telling GGUF files from ONNX model folders, and the plain-words errors for broken folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.library.model_files.gguf_info import ModelFileError
from app.library.model_files.model_format import (
    ModelFolderError,
    damaged_json_file,
    detect_format,
    read_onnx_folder,
)

TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"


@pytest.fixture
def onnx_copy(tmp_path: Path) -> Path:
    """A copy of the tiny ONNX model that a test may break."""
    return Path(shutil.copytree(TINY_ONNX, tmp_path / "tiny onnx ü"))


def _edit_json(file: Path, change) -> None:
    data = json.loads(file.read_text(encoding="utf-8"))
    change(data)
    file.write_text(json.dumps(data), encoding="utf-8")


def _error(path: Path, read=read_onnx_folder) -> ModelFolderError:
    with pytest.raises(ModelFolderError) as caught:
        read(path)
    return caught.value


def test_gguf_file(tiny_model: Path) -> None:
    assert detect_format(tiny_model) == "gguf"
    assert detect_format(str(tiny_model)) == "gguf"


def test_gguf_file_without_its_extension(tiny_model: Path, tmp_path: Path) -> None:
    renamed = shutil.copyfile(tiny_model, tmp_path / "model.bin")

    assert detect_format(renamed) == "gguf"


def test_broken_gguf_file_is_still_gguf(tmp_path: Path) -> None:
    # Its own reader then says what is wrong with it.
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not really")

    assert detect_format(broken) == "gguf"


def test_onnx_folder() -> None:
    assert detect_format(TINY_ONNX) == "onnx"


def test_missing_path(tmp_path: Path) -> None:
    error = _error(tmp_path / "gone", detect_format)

    assert error.kind == "missing"
    assert "was not found" in error.message


def test_other_file(tmp_path: Path) -> None:
    page = tmp_path / "model.html"
    page.write_text("<!doctype html>", encoding="utf-8")

    error = _error(page, detect_format)

    assert error.kind == "unknown_format"
    assert ".gguf file" in error.message and "genai_config.json" in error.message


@pytest.mark.parametrize("name", ["genai_config.json", "model.onnx", "model.onnx.data"])
def test_a_part_of_an_onnx_folder_asks_for_the_folder(name: str) -> None:
    error = _error(TINY_ONNX / name, detect_format)

    assert error.kind == "unknown_format"
    assert "Choose the folder" in error.message


def test_empty_folder(tmp_path: Path) -> None:
    error = _error(tmp_path, detect_format)

    assert error.kind == "unknown_format"
    assert "not a model Kestrel can run" in error.message


def test_folder_of_gguf_files(tmp_path: Path, tiny_model: Path) -> None:
    shutil.copyfile(tiny_model, tmp_path / "a.gguf")

    error = _error(tmp_path, detect_format)

    assert error.kind == "unknown_format"
    assert "choose the .gguf file itself" in error.message


def test_onnx_folder_without_genai_config(onnx_copy: Path) -> None:
    (onnx_copy / "genai_config.json").unlink()

    error = _error(onnx_copy, detect_format)

    assert error.kind == "no_config"
    assert "genai_config.json" in error.message and "Download" in error.message


def test_errors_are_model_file_errors(tmp_path: Path) -> None:
    # So whatever reports a bad GGUF file reports a bad folder the same way.
    error = _error(tmp_path / "gone", detect_format)

    assert isinstance(error, ModelFileError)
    assert error.path == tmp_path / "gone"


def test_reads_the_tiny_model() -> None:
    info = read_onnx_folder(TINY_ONNX)

    assert info.model_type == "llama"
    assert info.context_length == 2048
    assert info.decoder_file == TINY_ONNX / "model.onnx"
    assert (info.num_layers, info.num_kv_heads, info.head_size) == (2, 2, 16)
    assert info.vocab_size == 853
    assert info.eos_token_ids == (852, 850)
    assert info.chat_template and "<|im_start|>" in info.chat_template
    assert (info.bos_token, info.eos_token) == ("", "<|im_end|>")
    assert info.weights_bytes == sum(
        (TINY_ONNX / n).stat().st_size for n in ("model.onnx", "model.onnx.data"))


def test_gguf_file_is_not_an_onnx_folder(tiny_model: Path) -> None:
    assert _error(tiny_model).kind == "unknown_format"


def test_missing_model_file(onnx_copy: Path) -> None:
    (onnx_copy / "model.onnx").unlink()

    error = _error(onnx_copy)

    assert error.kind == "no_weights"
    assert "model.onnx" in error.message and "download the model again" in error.message


def test_model_file_named_by_the_config(onnx_copy: Path) -> None:
    _edit_json(onnx_copy / "genai_config.json",
               lambda c: c["model"]["decoder"].update(filename="decoder.onnx"))

    error = _error(onnx_copy)

    assert error.kind == "no_weights"
    assert "decoder.onnx" in error.message


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", "\udcff"])
def test_damaged_config(onnx_copy: Path, text: str) -> None:
    (onnx_copy / "genai_config.json").write_text(text, encoding="utf-8", errors="surrogateescape")

    error = _error(onnx_copy)

    assert error.kind == "bad_config"
    assert "genai_config.json" in error.message and "damaged" in error.message


@pytest.mark.parametrize("change, words", [
    (lambda c: c.pop("model"), '"model" section'),
    (lambda c: c["model"].pop("decoder"), '"model" section'),
    (lambda c: c["model"].pop("type"), "model.type"),
    (lambda c: c["model"].update(context_length=0), "model.context_length"),
    (lambda c: c["model"].update(context_length="2048"), "model.context_length"),
])
def test_config_without_what_is_needed(onnx_copy: Path, change, words: str) -> None:
    _edit_json(onnx_copy / "genai_config.json", change)

    error = _error(onnx_copy)

    assert error.kind == "bad_config"
    assert words in error.message


@pytest.mark.parametrize("name", ["tokenizer.json", "tokenizer_config.json"])
def test_missing_tokenizer(onnx_copy: Path, name: str) -> None:
    (onnx_copy / name).unlink()

    error = _error(onnx_copy)

    assert error.kind == "no_tokenizer"
    assert "tokenizer" in error.message and "download the model again" in error.message


def test_damaged_tokenizer_config(onnx_copy: Path) -> None:
    (onnx_copy / "tokenizer_config.json").write_text("{", encoding="utf-8")

    assert _error(onnx_copy).kind == "bad_tokenizer"


def test_template_file_comes_first(onnx_copy: Path) -> None:
    (onnx_copy / "chat_template.jinja").write_text("{{ messages[0].content }}", encoding="utf-8")

    assert read_onnx_folder(onnx_copy).chat_template == "{{ messages[0].content }}"


def test_template_in_chat_template_json(onnx_copy: Path) -> None:
    (onnx_copy / "chat_template.json").write_text(json.dumps({"chat_template": "T"}), encoding="utf-8")

    assert read_onnx_folder(onnx_copy).chat_template == "T"


def test_named_templates_use_the_default(onnx_copy: Path) -> None:
    _edit_json(onnx_copy / "tokenizer_config.json", lambda c: c.update(chat_template=[
        {"name": "tool_use", "template": "tools"}, {"name": "default", "template": "plain"}]))

    assert read_onnx_folder(onnx_copy).chat_template == "plain"


def test_no_template(onnx_copy: Path) -> None:
    _edit_json(onnx_copy / "tokenizer_config.json", lambda c: c.pop("chat_template"))

    assert read_onnx_folder(onnx_copy).chat_template is None


def test_special_tokens_written_as_objects(onnx_copy: Path) -> None:
    _edit_json(onnx_copy / "tokenizer_config.json", lambda c: c.update(
        bos_token={"content": "<s>", "special": True}, eos_token={"content": "</s>"}))

    info = read_onnx_folder(onnx_copy)

    assert (info.bos_token, info.eos_token) == ("<s>", "</s>")


# Issue 9, defect 8: ONNX Runtime GenAI says "UnicodeDecodeError" or a JSON parser's
# position for a damaged tokenizer.json; damaged_json_file names the file instead.

def test_an_intact_folder_has_no_damaged_json_file() -> None:
    assert damaged_json_file(TINY_ONNX) is None


@pytest.mark.parametrize("data, words", [
    (b'{"model": {"vocab": {"a": 1}}\xff}', "it is not UTF-8 text (at byte offset 29)"),
    (b'{"model": {"vocab": ', "it ends part-way through (cut short)"),
    (b"", "it is empty"),
    (b'{"model": nope}', "it is not valid JSON (line 1, column 11)"),
])
def test_a_damaged_tokenizer_json_is_named(onnx_copy: Path, data: bytes, words: str) -> None:
    (onnx_copy / "tokenizer.json").write_bytes(data)

    error = damaged_json_file(onnx_copy)

    assert error is not None and error.kind == "bad_tokenizer" and error.path == onnx_copy
    assert error.message == (f'The file tokenizer.json in the model folder "{onnx_copy.name}" is '
                             f"damaged: {words}. Download the model again.")


def test_a_damaged_config_reads_plainly(onnx_copy: Path) -> None:
    (onnx_copy / "genai_config.json").write_bytes(b"{\"model\": \xe9}")

    error = _error(onnx_copy)

    assert error.kind == "bad_config"
    assert "it is not UTF-8 text (at byte offset 10)" in error.message
    assert "codec" not in error.message


@pytest.mark.parametrize("name", ["genai_config.json", "tokenizer_config.json"])
def test_json_nested_too_deep_is_a_damaged_folder_in_words(onnx_copy: Path, name: str) -> None:
    """The robustness campaign found it: RecursionError surfaced raw."""
    (onnx_copy / name).write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    error = _error(onnx_copy)
    assert f"The file {name}" in str(error) and "nested thousands of levels deep" in str(error)


@pytest.mark.parametrize(("template", "expected"), [
    ("Qwen-Qwen3-0.6B.jinja", ["tools", "reasoning"]),
    ("openai-gpt-oss-120b.jinja", ["tools", "reasoning"]),
    ("meta-llama-Llama-3.2-3B-Instruct.jinja", ["tools"]),
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ["reasoning"]),
    ("google-gemma-2-2b-it.jinja", []),
    ("microsoft-Phi-3.5-mini-instruct.jinja", []),
])
def test_a_models_template_says_whether_it_takes_tools_and_thinks(template: str, expected: list[str]) -> None:
    """The model cards tag what the real publishers' templates show; a plain chat template gets no tag."""
    from app.library.model_details import template_capabilities

    text = (Path(__file__).parents[1] / "fixtures" / "chat_templates" / template).read_text(encoding="utf-8")
    assert template_capabilities(text) == expected
    assert template_capabilities(None) == []
