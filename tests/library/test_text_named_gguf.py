"""A text file named x.gguf is told it is text, not a model, and what to do; never "download the .gguf version"."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.library.model_files.gguf_info import ModelFileError
from app.library.importer import import_model_file
from app.library.models import ModelLibrary


@pytest.mark.parametrize("content, says", [
    (b"hello, these are my notes\nsecond line\n", 'it begins "hello, these are my notes"'),
    (b"version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 4\n", "a Git LFS pointer"),
    (b"<!DOCTYPE html><html><body>Not found</body></html>", "a web page"),
    (b'{"error": "Repository not found"}', "JSON, such as an error message"),
    ("réponse en français\n".encode("utf-8"), 'it begins "réponse en français"'),
])
def test_text_named_gguf_is_told_it_holds_text(tmp_path: Path, content: bytes, says: str) -> None:
    source = tmp_path / "x.gguf"
    source.write_bytes(content)
    library = ModelLibrary(tmp_path / "models")
    with pytest.raises(ModelFileError) as refused:
        import_model_file(library, source)
    message = str(refused.value)
    assert refused.value.kind == "not_gguf"
    assert message.startswith('"x.gguf" is not a GGUF model file: it holds text (')
    assert says in message
    assert "download the .gguf version" not in message
    assert "download the .gguf file again from the model's page" in message
    assert library.list() == []


def test_a_binary_file_that_is_not_gguf_is_left_to_the_gguf_reader(tmp_path: Path) -> None:
    source = tmp_path / "weights.gguf"
    source.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
    with pytest.raises(ModelFileError) as refused:
        import_model_file(ModelLibrary(tmp_path / "models"), source)
    assert "holds text" not in str(refused.value)
    assert "ZIP archive" in str(refused.value)


def test_a_real_model_is_not_mistaken_for_text(tmp_path: Path, tiny_model: Path) -> None:
    installed = import_model_file(ModelLibrary(tmp_path / "models"), tiny_model)
    assert installed.path.is_file()


def test_the_header_reader_itself_never_tells_a_gguf_named_file_to_fetch_the_gguf_version(tmp_path) -> None:
    """Paths that skip the importer (a folder read in place, the engine) read the header directly."""
    from app.library.model_files.gguf_info import ModelFileError, read_gguf_info

    named = tmp_path / "model.gguf"
    named.write_bytes(b"PK\x03\x04" + bytes(64))  # a zip saved under a model's name
    with pytest.raises(ModelFileError) as caught:
        read_gguf_info(named)
    assert "though its name ends in .gguf" in caught.value.message
    assert "download the .gguf version" not in caught.value.message
    other = tmp_path / "model.safetensors"
    other.write_bytes(b"PK\x03\x04" + bytes(64))
    with pytest.raises(ModelFileError) as caught:
        read_gguf_info(other)
    assert "download the .gguf version of this model" in caught.value.message
