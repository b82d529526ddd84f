"""Finding models in a folder: GGUF files at any depth, split GGUFs as one, ONNX folders, and what is passed over."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from app.library.model_files.gguf_info import ModelFileError
from app.library.scan import ScanCancelled, examine, scan_folder, split_files, split_part

ONNX_MODEL = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"


def write_gguf(path: Path, *, name: str = "Tiny", split: tuple[int, int] | None = None,
               values: int = 16) -> Path:
    """A small valid GGUF: llama architecture, one tensor; with split=(number, count) it
    carries gguf-split's split.no / split.count, as each part of a real split model does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_block_count(1)
    if split is not None:
        writer.add_uint16("split.no", split[0] - 1)
        writer.add_uint16("split.count", split[1])
        writer.add_int32("split.tensors.count", split[1])
    writer.add_tensor(f"blk.{split[0] if split else 0}.weight", np.ones(values, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_split(folder: Path, stem: str, count: int, *, leave_out: tuple[int, ...] = ()) -> list[Path]:
    return [write_gguf(folder / f"{stem}-{n:05d}-of-{count:05d}.gguf", name=stem, split=(n, count),
                       values=16 * n)
            for n in range(1, count + 1) if n not in leave_out]


def test_split_names_are_read_and_every_part_named() -> None:
    first = Path("/m/big-model-00001-of-00003.gguf")
    assert split_part(first) == ("big-model", 1, 3)
    assert split_part(Path("/m/big-00004-of-00003.gguf")) is None
    assert split_part(Path("/m/plain.gguf")) is None
    assert [p.name for p in split_files(first)] == [
        "big-model-00001-of-00003.gguf", "big-model-00002-of-00003.gguf", "big-model-00003-of-00003.gguf"]
    assert split_files(Path("/m/big-model-00002-of-00003.gguf")) == ()


def test_models_are_found_at_any_depth_and_a_split_gguf_is_one(tmp_path: Path) -> None:
    write_gguf(tmp_path / "a" / "b" / "c" / "deep.gguf", name="Deep")
    parts = write_split(tmp_path / "split models", "big", 3)
    shutil.copytree(ONNX_MODEL, tmp_path / "x" / "phi onnx")
    (tmp_path / "notes.txt").write_text("not a model")
    seen: list[Path] = []

    scan = scan_folder(tmp_path, progress=lambda count, folder: seen.append(folder))

    found = {f.path.name: f for f in scan.found}
    assert set(found) == {"deep.gguf", "big-00001-of-00003.gguf", "phi onnx"}
    assert found["deep.gguf"].title == "Deep" and found["deep.gguf"].files == ()
    assert found["big-00001-of-00003.gguf"].files == tuple(parts)
    assert found["big-00001-of-00003.gguf"].size == sum(p.stat().st_size for p in parts)
    assert found["phi onnx"].format == "onnx" and "ONNX" in found["phi onnx"].title
    assert scan.skipped == [] and tmp_path / "a" / "b" / "c" in seen
    assert tmp_path / "x" / "phi onnx" not in seen, "an ONNX folder is not looked into"


def test_a_split_gguf_with_a_part_missing_is_skipped_saying_which(tmp_path: Path) -> None:
    write_split(tmp_path, "big", 5, leave_out=(3,))
    write_split(tmp_path, "headless", 2, leave_out=(1,))

    scan = scan_folder(tmp_path)

    assert scan.found == []
    reasons = {path.name: reason for path, reason in scan.skipped}
    assert "part 3 of 5" in reasons["big-00001-of-00005.gguf"] and "is missing" in reasons["big-00001-of-00005.gguf"]
    assert "part 1 of 2" in reasons["headless-00002-of-00002.gguf"]


def test_unfinished_hidden_and_broken_things_are_skipped_with_the_reason(tmp_path: Path) -> None:
    write_gguf(tmp_path / "good.gguf")
    (tmp_path / "coming.gguf.part").write_bytes(b"GGUF")
    (tmp_path / "._good.gguf").write_bytes(b"\x00\x05\x16\x07")  # macOS's AppleDouble file
    (tmp_path / "fake.gguf").write_bytes(b"PK\x03\x04 not a model")
    write_gguf(tmp_path / ".cache" / "hidden.gguf")
    write_gguf(tmp_path / "dl.partial" / "inside.gguf")
    broken = tmp_path / "broken onnx"
    shutil.copytree(ONNX_MODEL, broken)
    (broken / "model.onnx").unlink()

    scan = scan_folder(tmp_path)

    assert [f.path.name for f in scan.found] == ["good.gguf"]
    reasons = {path.name: reason for path, reason in scan.skipped}
    assert reasons["coming.gguf.part"] == "a download or copy that has not finished"
    assert reasons["dl.partial"] == "a download or copy that has not finished"
    assert reasons[".cache"] == "a hidden folder" and reasons["._good.gguf"] == "a hidden file"
    assert "fake.gguf" in reasons and "broken onnx" in reasons


def test_known_paths_are_reported_as_known_without_being_read(tmp_path: Path) -> None:
    model = write_gguf(tmp_path / "sub" / "known.gguf")
    scan = scan_folder(tmp_path, known=[model])
    assert scan.found == [] and scan.known == [model]


@pytest.mark.skipif(os.name == "nt", reason="links to folders need privileges on Windows")
def test_a_loop_of_links_is_looked_in_once(tmp_path: Path) -> None:
    write_gguf(tmp_path / "models" / "one.gguf")
    (tmp_path / "models" / "back").symlink_to(tmp_path, target_is_directory=True)

    scan = scan_folder(tmp_path)

    assert [f.path.name for f in scan.found] == ["one.gguf"]


@pytest.mark.skipif(os.name == "nt" or os.geteuid() == 0, reason="root may read any folder")
def test_an_unreadable_folder_is_skipped_with_the_reason(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    write_gguf(locked / "inside.gguf")
    locked.chmod(0)
    try:
        scan = scan_folder(tmp_path)
    finally:
        locked.chmod(0o755)
    assert scan.found == [] and "could not be read" in dict(scan.skipped)[locked]


def test_a_cancelled_scan_stops(tmp_path: Path) -> None:
    write_gguf(tmp_path / "a" / "one.gguf")
    with pytest.raises(ScanCancelled):
        scan_folder(tmp_path, cancelled=lambda: True)


def test_examine_takes_any_part_of_a_split_model_as_the_whole(tmp_path: Path) -> None:
    parts = write_split(tmp_path, "big", 3)
    found = examine(parts[1])
    assert found.path == parts[0] and found.files == tuple(parts) and found.title == "big"
    parts[2].unlink()
    with pytest.raises(ModelFileError, match="part 3 of 3"):
        examine(parts[0])


def test_a_folder_that_is_itself_an_onnx_model_is_found(tmp_path: Path) -> None:
    scan = scan_folder(ONNX_MODEL)
    assert [f.path for f in scan.found] == [ONNX_MODEL]
