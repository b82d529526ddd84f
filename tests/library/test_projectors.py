"""Vision projectors in the library: told from models by their header, paired with the model
beside them, kept in model.json, brought along by an import, paired and unpaired by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from gguf import LlamaFileType

from app.library.model_files.gguf_info import ModelFileError
from app.library.importer import import_model_file
from app.library.model_details import model_details
from app.library.models import METADATA_FILE, ModelLibrary
from app.library.projector import best_name
from tests.helpers.projector_header import write_projector, write_text_model


@pytest.fixture
def library(tmp_path: Path) -> ModelLibrary:
    return ModelLibrary(tmp_path / "models")


def recorded(library: ModelLibrary, model_id: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((library.root / model_id / METADATA_FILE).read_text(encoding="utf-8"))
    return data


def test_a_folder_scan_pairs_a_model_with_the_projector_beside_it_and_never_lists_the_projector(
        tmp_path: Path, library: ModelLibrary) -> None:
    kept = tmp_path / "kept"
    model = write_text_model(kept / "gemma-4b-it-Q4_K_M.gguf", embedding_length=64)
    projector = write_projector(kept / "mmproj-gemma-4b-it-f16.gguf", projection_dim=64)

    scan = library.add_folder(kept)

    [added] = scan.added
    assert (added.path, added.projector, added.vision) == (model, projector, True)
    assert [m.path for m in library.list()] == [model], "a projector is never a model of its own"
    assert [(path, why) for path, why in scan.skipped] == [
        (projector, "a vision projector, which goes with the model beside it (it is not a model of its own)")]
    assert recorded(library, added.id)["projector"] == str(projector), "referenced: its absolute path"
    details = model_details(added.path, added.projector)
    assert details["capabilities"][0] == "vision" and details["projector"] == str(projector)
    assert "vision" not in model_details(added.path)["capabilities"], "no projector given: text only"


def test_a_projector_is_told_by_its_header_whatever_its_name(tmp_path: Path, library: ModelLibrary) -> None:
    kept = tmp_path / "kept"
    model = write_text_model(kept / "qwen.gguf", embedding_length=64)
    disguised = write_projector(kept / "vision-encoder.gguf", projection_dim=64)

    [added] = library.add_folder(kept).added

    assert (added.path, added.projector) == (model, disguised)


def test_of_several_projectors_the_one_named_for_the_model_wins_then_f16_over_bf16_over_f32(
        tmp_path: Path, library: ModelLibrary) -> None:
    kept = tmp_path / "kept"
    write_text_model(kept / "gemma-4b-it-Q4_K_M.gguf", embedding_length=64)
    write_projector(kept / "mmproj-llava-f16.gguf", projection_dim=64)
    named = write_projector(kept / "mmproj-gemma-4b-it-f32.gguf", projection_dim=64,
                            file_type=LlamaFileType.ALL_F32)

    [added] = library.add_folder(kept).added

    assert added.projector == named, "the name shared with the model beats a better precision"
    # Names that share nothing with the model: F16, then BF16, then F32, then quantized.
    names = ["mmproj-q8_0.gguf", "mmproj-f32.gguf", "mmproj-bf16.gguf", "mmproj-f16.gguf"]
    assert best_name(names, "model-Q4_K_M.gguf") == "mmproj-f16.gguf"
    assert best_name(names[:3], "model-Q4_K_M.gguf") == "mmproj-bf16.gguf"
    assert best_name(names[:2], "model-Q4_K_M.gguf") == "mmproj-f32.gguf"
    # A header's file type is believed over a name that says nothing.
    assert best_name(["a.gguf", "b.gguf"], "m.gguf", {"a.gguf": None, "b.gguf": "f16"}) == "b.gguf"


def test_a_projector_of_another_width_or_without_an_image_encoder_is_not_paired(
        tmp_path: Path, library: ModelLibrary) -> None:
    kept = tmp_path / "kept"
    model = write_text_model(kept / "small.gguf", embedding_length=64)
    write_projector(kept / "mmproj-big-f16.gguf", projection_dim=128)
    write_projector(kept / "mmproj-audio-f16.gguf", projection_dim=64, vision=False)

    [added] = library.add_folder(kept).added

    assert (added.path, added.projector, added.vision) == (model, None, False)
    assert "projector" not in recorded(library, added.id)
    assert len(library.list()) == 1


def test_an_older_projector_whose_width_field_means_something_else_is_paired_all_the_same(
        tmp_path: Path, library: ModelLibrary) -> None:
    # Older (llava-era) converters wrote no general.type and another number under
    # projection_dim: only libmtmd, when the pair loads, can say whether they fit.
    kept = tmp_path / "kept"
    model = write_text_model(kept / "llava.gguf", embedding_length=64)
    older = write_projector(kept / "mmproj-llava-f16.gguf", projection_dim=768, legacy=True)

    [added] = library.add_folder(kept).added

    assert (added.path, added.projector, added.vision) == (model, older, True)
    assert library.set_projector(added.id, older).projector == older


def test_a_projector_added_or_imported_alone_is_refused_in_words(tmp_path: Path, library: ModelLibrary) -> None:
    projector = write_projector(tmp_path / "mmproj-model-f16.gguf")
    words = ("mmproj-model-f16.gguf is a vision projector, not a model: it lets a model read images. "
             "Put it beside its model (in the same folder) and add the model; Kestrel pairs the two.")

    with pytest.raises(ModelFileError) as added:
        library.add_reference(projector)
    with pytest.raises(ModelFileError) as imported:
        import_model_file(library, projector)

    assert (added.value.kind, added.value.message) == ("projector", words)
    assert imported.value.message == words
    assert library.list() == [] and not any(library.root.glob("*/*")), "nothing was copied"


def test_an_import_copies_the_projector_into_the_models_folder_and_removing_it_removes_both(
        tmp_path: Path, library: ModelLibrary) -> None:
    source = tmp_path / "downloads"
    model = write_text_model(source / "tiny-Q8_0.gguf", embedding_length=64)
    write_projector(source / "mmproj-tiny-f16.gguf", projection_dim=64)

    imported = import_model_file(library, model)

    folder = library.root / imported.id
    assert imported.projector == folder / "mmproj-tiny-f16.gguf" and imported.projector.is_file()
    assert recorded(library, imported.id)["projector"] == "mmproj-tiny-f16.gguf", "its own folder: the name"
    assert imported.sha256 is not None and imported.files == ()
    again = library.get(imported.id)
    assert again is not None and again.projector == imported.projector and again.vision
    assert library.disk_use().in_folder[imported.id] == model.stat().st_size + imported.projector.stat().st_size
    removed = library.remove(again)
    assert removed.left == () and not folder.exists()
    assert (source / "mmproj-tiny-f16.gguf").is_file(), "the user's own copy stays"


def test_a_projector_that_is_gone_leaves_the_model_listed_text_only_until_it_is_back(
        tmp_path: Path, library: ModelLibrary) -> None:
    kept = tmp_path / "kept"
    model = write_text_model(kept / "tiny.gguf", embedding_length=64)
    projector = write_projector(kept / "mmproj-tiny-f16.gguf", projection_dim=64)
    added = library.add_reference(model)
    moved = shutil.move(projector, tmp_path / "elsewhere.gguf")

    [listed] = library.list()

    assert (listed.id, listed.projector, listed.missing_projector, listed.vision) == (added.id, None, projector, False)
    assert not listed.missing, "the model itself is there"
    assert recorded(library, added.id)["projector"] == str(projector), "model.json keeps it"
    details = model_details(listed.path, listed.projector, listed.missing_projector)
    assert "vision" not in details["capabilities"]
    assert details["projector_missing"] == (f"The vision projector {projector} is not there now, so the model "
                                            "reads text only. Put the file back (or reconnect its drive) to "
                                            "give it sight again.")
    shutil.move(moved, projector)
    back = library.get(added.id)
    assert back is not None and (back.projector, back.missing_projector) == (projector, None)


def test_a_damaged_projector_entry_loses_the_projector_not_the_model(library: ModelLibrary, tmp_path: Path) -> None:
    model = write_text_model(tmp_path / "tiny.gguf", embedding_length=64)
    added = library.add_reference(model)
    data = recorded(library, added.id)
    (library.root / added.id / METADATA_FILE).write_text(json.dumps({**data, "projector": "not/absolute"}))

    listed = library.get(added.id)

    assert listed is not None and listed.path == model and listed.projector is None
    # A model in Kestrel's folder names its projector by file name only: a path leading out
    # of the folder is never taken, so removing the model cannot delete what it leads to.
    outside = write_projector(tmp_path / "mmproj-tiny-f16.gguf", projection_dim=64)
    own = import_model_file(library, write_text_model(tmp_path / "src" / "own.gguf", embedding_length=64))
    data = recorded(library, own.id)
    (library.root / own.id / METADATA_FILE).write_text(json.dumps({**data, "projector": f"../../{outside.name}"}))
    taken = library.get(own.id)
    assert taken is not None and (taken.projector, taken.missing_projector) == (None, None)
    library.remove(taken)
    assert outside.is_file()


def test_a_user_pairs_and_unpairs_a_projector_by_hand(tmp_path: Path, library: ModelLibrary) -> None:
    model = write_text_model(tmp_path / "kept" / "tiny.gguf", embedding_length=64)
    added = library.add_reference(model)
    assert added.projector is None
    projector = write_projector(tmp_path / "other" / "mmproj-tiny-f16.gguf", projection_dim=64)
    wrong = write_projector(tmp_path / "other" / "mmproj-big-f16.gguf", projection_dim=4096)
    another_model = write_text_model(tmp_path / "other" / "m.gguf")

    paired = library.set_projector(added.id, projector)

    assert (paired.projector, paired.vision) == (projector, True)
    assert recorded(library, added.id)["projector"] == str(projector)
    with pytest.raises(ValueError, match="mmproj-big-f16.gguf is made for a model 4,096 numbers wide, and "
                                         "Tiny is 64: it belongs to another model"):
        library.set_projector(added.id, wrong)
    with pytest.raises(ValueError, match=r"m\.gguf is not a vision projector \(an mmproj GGUF file\)"):
        library.set_projector(added.id, another_model)
    with pytest.raises(LookupError):
        library.set_projector("no-such-model", projector)
    unpaired = library.set_projector(added.id, None)
    assert (unpaired.projector, unpaired.vision) == (None, False)
    assert "projector" not in recorded(library, added.id)


def test_a_model_kestrel_keeps_takes_a_projector_only_from_its_own_folder(
        tmp_path: Path, library: ModelLibrary) -> None:
    imported = import_model_file(library, write_text_model(tmp_path / "src" / "tiny.gguf", embedding_length=64))
    outside = write_projector(tmp_path / "elsewhere" / "mmproj-tiny-f16.gguf", projection_dim=64)

    with pytest.raises(ValueError, match="is not in Tiny's folder"):
        library.set_projector(imported.id, outside)
    inside = shutil.copy(outside, library.root / imported.id / outside.name)
    paired = library.set_projector(imported.id, Path(inside))

    assert paired.projector == Path(inside)
    assert recorded(library, imported.id)["projector"] == outside.name
