"""The library: models kept where the user has them, missing and back, put in by hand, their defaults and disk use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.library.model_files.gguf_info import ModelFileError
from app.library.importer import import_model_file
from app.library.model_defaults import ModelDefaults
from app.library.models import FOUND_SOURCE, METADATA_FILE, ModelLibrary
from tests.library.test_scan import ONNX_MODEL, write_gguf, write_split


@pytest.fixture
def library(tmp_path: Path) -> ModelLibrary:
    return ModelLibrary(tmp_path / "models")


def everything_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --- referenced models ---------------------------------------------------------------------

def test_a_referenced_file_stays_where_it_is_and_is_recorded_by_its_absolute_path(
        library: ModelLibrary, tmp_path: Path) -> None:
    mine = tmp_path / "Mes modèles ü" / "tiny model.gguf"
    write_gguf(mine, name="Tiny ü")
    before = everything_under(mine.parent)

    model = library.add_reference(mine)

    assert (model.referenced, model.missing, model.path, model.title) == (True, False, mine, "Tiny ü")
    assert model.size == mine.stat().st_size and model.format == "gguf"
    assert everything_under(mine.parent) == before, "nothing is written beside the user's file"
    written = json.loads((library.root / model.id / METADATA_FILE).read_text(encoding="utf-8"))
    assert written["path"] == str(mine) and written["referenced"] is True
    assert "Mes modèles ü" in (library.root / model.id / METADATA_FILE).read_text(encoding="utf-8")
    assert library.list() == [model] and library.find(str(mine)) == model
    assert library.add_reference(mine) == model, "the same file twice is one model"


def test_removing_a_referenced_model_forgets_it_and_never_touches_the_file(
        library: ModelLibrary, tmp_path: Path) -> None:
    mine = write_gguf(tmp_path / "keep" / "mine.gguf")
    before = mine.read_bytes()
    model = library.add_reference(mine)

    removed = library.remove(model)

    assert removed.freed == 0 and removed.left == ()
    assert mine.read_bytes() == before and library.list() == []
    assert not (library.root / model.id).exists()


def test_an_onnx_folder_is_referenced_in_place(library: ModelLibrary, tmp_path: Path) -> None:
    mine = tmp_path / "onnx models" / "phi"
    shutil.copytree(ONNX_MODEL, mine)
    model = library.add_reference(mine)
    assert model.format == "onnx" and model.path == mine and "ONNX" in model.title
    assert library.remove(model).freed == 0 and (mine / "genai_config.json").is_file()


def test_something_that_is_not_a_model_is_refused(library: ModelLibrary, tmp_path: Path) -> None:
    (tmp_path / "notes.gguf").write_bytes(b"just text, not a model")
    with pytest.raises(ModelFileError):
        library.add_reference(tmp_path / "notes.gguf")
    assert library.list() == []


def test_a_split_gguf_is_one_model_found_by_any_of_its_parts(library: ModelLibrary, tmp_path: Path) -> None:
    parts = write_split(tmp_path / "big", "big", 3)
    model = library.add_reference(parts[2])
    assert model.id == "big" and model.path == parts[0] and model.files == tuple(parts)
    assert model.size == sum(p.stat().st_size for p in parts)
    assert library.find(str(parts[1])) == model


# --- missing and back ----------------------------------------------------------------------

def test_a_missing_file_is_listed_as_missing_and_comes_back_with_its_settings(
        library: ModelLibrary, tmp_path: Path) -> None:
    drive = tmp_path / "usb drive"
    mine = write_gguf(drive / "mine.gguf")
    other = library.add_reference(write_gguf(tmp_path / "other.gguf"))
    model = library.set_defaults(library.add_reference(mine).id, ModelDefaults(temperature=0.2))
    unplugged = tmp_path / "unplugged"
    drive.rename(unplugged)

    gone = library.get(model.id)
    assert gone is not None and gone.missing and gone.size == model.size
    assert gone.defaults == ModelDefaults(temperature=0.2)
    assert [m.id for m in library.list()] == [other.id, model.id]
    assert library.default(model.id) == other, "the default is never a missing model"
    assert library.find(model.id) == gone and library.find(str(mine)) == gone

    unplugged.rename(drive)
    back = library.get(model.id)
    assert back is not None and not back.missing and back.defaults.temperature == 0.2
    assert library.default(model.id) == back


def test_one_missing_part_makes_a_split_model_missing(library: ModelLibrary, tmp_path: Path) -> None:
    parts = write_split(tmp_path, "big", 3)
    model = library.add_reference(parts[0])
    parts[1].rename(tmp_path / "elsewhere.gguf")
    gone = library.get(model.id)
    assert gone is not None and gone.missing
    assert library.default(None) is None


def test_a_missing_model_can_be_removed_and_its_record_only_goes(library: ModelLibrary, tmp_path: Path) -> None:
    model = library.add_reference(write_gguf(tmp_path / "mine.gguf"))
    (tmp_path / "mine.gguf").unlink()
    gone = library.find(model.id)
    assert gone is not None and library.remove(gone).freed == 0 and library.list() == []


# --- add a folder --------------------------------------------------------------------------

def test_a_folder_is_scanned_at_any_depth_and_a_second_scan_finds_them_known(
        library: ModelLibrary, tmp_path: Path) -> None:
    shelf = tmp_path / "my models ü"
    deep = write_gguf(shelf / "one" / "two" / "three" / "deep.gguf", name="Deep")
    write_split(shelf / "split", "big", 2)
    shutil.copytree(ONNX_MODEL, shelf / "onnx" / "phi")
    write_split(shelf / "broken", "half", 3, leave_out=(2,))
    before = everything_under(shelf)
    seen: list[int] = []

    scan = library.add_folder(shelf, progress=lambda count, folder: seen.append(count))

    assert sorted(m.path.name for m in scan.added) == ["big-00001-of-00002.gguf", "deep.gguf", "phi"]
    assert all(m.referenced and m.source == f"found in {shelf}" for m in scan.added)
    assert [reason for _, reason in scan.skipped] == ["part 2 of 3 (half-00002-of-00003.gguf) is missing"]
    assert scan.known == () and seen and everything_under(shelf) == before
    again = library.add_folder(shelf)
    assert again.added == () and {m.id for m in again.known} == {m.id for m in scan.added}
    assert len(library.list()) == 3
    assert library.find(str(deep)) is not None


def test_a_copied_model_is_known_to_a_scan_of_the_models_folder(library: ModelLibrary, tmp_path: Path) -> None:
    copied = import_model_file(library, write_gguf(tmp_path / "a.gguf"))
    scan = library.add_folder(library.root)
    assert scan.added == () and scan.known == (copied,)


# --- put into the models folder by hand ----------------------------------------------------

def test_a_file_and_an_onnx_folder_dropped_in_by_hand_show_up(library: ModelLibrary) -> None:
    dropped = write_gguf(library.root / "dropped by hand.gguf", name="Dropped")
    shutil.copytree(ONNX_MODEL, library.root / "phi onnx")
    (library.root / "coming.gguf.part").write_bytes(b"GGUF")
    (library.root / "coming.gguf.partial").write_bytes(b"GGUF")
    write_gguf(library.root / ".downloads" / "x" / "hidden.gguf")

    listed = library.list()

    assert sorted(m.path.name for m in listed) == ["dropped by hand.gguf", "phi onnx"]
    assert all(m.referenced and m.source == FOUND_SOURCE for m in listed)
    assert library.list() == listed, "registered once, not again on each listing"
    assert library.find(str(dropped)) is not None


def test_a_removed_hand_dropped_file_stays_and_does_not_come_back(library: ModelLibrary) -> None:
    dropped = write_gguf(library.root / "mine.gguf")
    [model] = library.list()

    assert library.remove(model).freed == 0
    assert dropped.is_file() and library.list() == [] and library.list() == []

    again = library.add_reference(dropped)  # added on purpose: listed again
    assert library.list() == [again]


def test_a_new_file_under_a_forgotten_name_shows_up(library: ModelLibrary) -> None:
    dropped = write_gguf(library.root / "mine.gguf", values=16)
    library.remove(library.list()[0])
    write_gguf(dropped, values=64)  # another model saved under the same name
    assert [m.path for m in library.list()] == [dropped]


def test_a_damaged_file_dropped_in_is_not_listed(library: ModelLibrary) -> None:
    library.root.mkdir(parents=True)
    (library.root / "broken.gguf").write_bytes(b"GGUF" + b"\xff" * 20)
    assert library.list() == []


# --- a crash mid-import --------------------------------------------------------------------

def test_nothing_half_written_is_ever_listed(library: ModelLibrary, tmp_path: Path) -> None:
    cut = library.folder_for("cut")
    (cut / "cut.gguf.partial").write_bytes(b"GGUF half")
    model = import_model_file(library, write_gguf(tmp_path / "whole.gguf"))
    with model.path.open("ab") as grown:  # model.json written, but the file not as it says
        grown.write(b"more")
    split = import_model_file(library, write_split(tmp_path / "s", "big", 2)[0])
    split.files[1].unlink()

    assert library.list() == []


def test_a_split_gguf_is_copied_whole(library: ModelLibrary, tmp_path: Path) -> None:
    parts = write_split(tmp_path / "s", "big", 3)
    model = import_model_file(library, parts[0])
    assert [p.name for p in model.files] == [p.name for p in parts] and not model.referenced
    assert all(p.parent == library.root / "big" for p in model.files)
    assert library.list() == [model]
    assert library.remove(model).freed > model.size and all(p.is_file() for p in parts)


# --- defaults and model.json from other versions -------------------------------------------

def test_defaults_are_kept_checked_and_cleared(library: ModelLibrary, tmp_path: Path) -> None:
    model = import_model_file(library, write_gguf(tmp_path / "a.gguf"))
    chosen = ModelDefaults(context_length=8192, gpu_layers=-1, system_prompt="Sois bref.",
                           chat_template="{{ x }}")

    saved = library.set_defaults(model.id, chosen)

    assert saved.defaults == chosen and library.get(model.id) == saved
    with pytest.raises(ValueError, match="context_length"):
        library.set_defaults(model.id, ModelDefaults(context_length=3))
    assert library.get(model.id) == saved, "a refused value changes nothing"
    assert library.set_defaults(model.id, ModelDefaults()).defaults == ModelDefaults()
    with pytest.raises(LookupError):
        library.set_defaults("nope", chosen)


def test_a_model_json_with_bad_or_newer_keys_is_still_read(library: ModelLibrary, tmp_path: Path) -> None:
    model = import_model_file(library, write_gguf(tmp_path / "a.gguf"))
    record = library.root / model.id / METADATA_FILE
    data = json.loads(record.read_text(encoding="utf-8"))
    data.update(version=99, title=["not", "text"], added="yesterday", sha256=5,
                from_the_future={"x": 1}, defaults={"temperature": "hot", "top_k": 12, "new": 1})
    record.write_text(json.dumps(data), encoding="utf-8")

    [read] = library.list()

    assert read.title == model.id and read.added == 0.0 and read.sha256 is None
    assert read.defaults == ModelDefaults(top_k=12)
    library.set_defaults(model.id, ModelDefaults(seed=3))
    assert json.loads(record.read_text(encoding="utf-8"))["from_the_future"] == {"x": 1}


def test_the_format_is_kept_in_model_json_when_a_model_is_added(library: ModelLibrary, tmp_path: Path) -> None:
    # A GGUF file need not be called .gguf: once it is gone, only what was kept says what it was.
    unnamed = library.add_reference(write_gguf(tmp_path / "model.bin"))
    shutil.copytree(ONNX_MODEL, tmp_path / "phi")
    onnx = library.add_reference(tmp_path / "phi")
    copied = import_model_file(library, write_gguf(tmp_path / "a.gguf"))
    written = {m.id: json.loads((library.root / m.id / METADATA_FILE).read_text(encoding="utf-8"))["format"]
               for m in (unnamed, onnx, copied)}
    assert written == {unnamed.id: "gguf", onnx.id: "onnx", copied.id: "gguf"}

    (tmp_path / "model.bin").unlink()
    shutil.rmtree(tmp_path / "phi")

    assert {m.id: (m.format, m.missing) for m in library.list()} == {
        unnamed.id: ("gguf", True), onnx.id: ("onnx", True), copied.id: ("gguf", False)}


def test_a_model_json_from_before_the_format_was_kept_gets_one_when_read(
        library: ModelLibrary, tmp_path: Path) -> None:
    copied = import_model_file(library, write_gguf(tmp_path / "a.gguf"))
    shutil.copytree(ONNX_MODEL, tmp_path / "phi")
    onnx = library.add_reference(tmp_path / "phi")
    gone = library.add_reference(write_gguf(tmp_path / "gone.gguf"))
    (tmp_path / "gone.gguf").unlink()
    for model in (copied, onnx, gone):
        record = library.root / model.id / METADATA_FILE
        data = json.loads(record.read_text(encoding="utf-8"))
        record.write_text(json.dumps({k: v for k, v in data.items() if k != "format"}), encoding="utf-8")

    assert {m.id: m.format for m in library.list()} == {copied.id: "gguf", onnx.id: "onnx", gone.id: "gguf"}


@pytest.mark.parametrize("text", ["[]", "null", "{", '{"referenced": true, "path": "relative.gguf"}',
                                  '{"referenced": true, "path": "/x.gguf", "files": "nope"}'])
def test_a_damaged_model_json_is_passed_over(library: ModelLibrary, text: str) -> None:
    (library.folder_for("bad") / METADATA_FILE).write_text(text, encoding="utf-8")
    assert library.list() == []


# --- disk use ------------------------------------------------------------------------------

def test_disk_use_counts_copies_in_the_folder_and_referenced_models_apart(
        library: ModelLibrary, tmp_path: Path) -> None:
    copied = import_model_file(library, write_gguf(tmp_path / "a.gguf"))
    mine = library.add_reference(write_gguf(tmp_path / "b.gguf", values=64))
    gone = library.add_reference(write_gguf(tmp_path / "c.gguf"))
    (tmp_path / "c.gguf").unlink()

    use = library.disk_use()

    assert use.in_folder == {copied.id: copied.size, mine.id: 0, gone.id: 0}
    assert use.referenced == {mine.id: mine.size}
    assert (use.total, use.referenced_total) == (copied.size, mine.size)
