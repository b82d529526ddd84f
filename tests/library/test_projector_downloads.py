"""Vision projectors in downloads: a repository's GGUF brings its folder's projector, the catalog
names one, and a fetch over real HTTP servers on 127.0.0.1 registers the pair (or the model
alone when what came is no projector for it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.library.catalog import CatalogEntryError, CatalogFile, load_catalog, parse_entry
from app.library.download import DownloadOptions
from app.library.fetch import fetch_unit
from app.library.huggingface.hub import DownloadUnit, catalog_unit, choose, group_units, units_for
from app.library.huggingface.hub_listing import RepoFile
from app.library.models import METADATA_FILE, ModelLibrary
from tests.helpers.http_servers import TestServer, hugging_face_repo, sha256_of
from tests.helpers.projector_header import write_projector, write_text_model

FAST = DownloadOptions(retry_delays=(0.01, 0.02), timeout_s=5.0, chunk_size=16 * 1024, space_margin=0)
ENDPOINT = "https://hub.example"
SHA = "ab" * 32


def listed(*paths: str) -> list[RepoFile]:
    return [RepoFile(path, 100 + i, f"{i:064x}") for i, path in enumerate(paths)]


def test_each_gguf_unit_brings_the_projector_of_its_own_folder_chosen_by_name_and_precision() -> None:
    files = listed("gemma-4b-it-Q4_K_M.gguf", "gemma-4b-it-Q8_0.gguf", "mmproj-model-bf16.gguf",
                   "mmproj-model-f16.gguf", "mmproj-model-f32.gguf",
                   "big/big-Q4_K_M-00001-of-00002.gguf", "big/big-Q4_K_M-00002-of-00002.gguf",
                   "big/mmproj-big-f32.gguf", "big/mmproj-other-f16.gguf", "text/plain-Q4_K_M.gguf")

    units = group_units("o/m", "main", ENDPOINT, files)

    by_key = {u.key: u for u in units}
    assert sorted(by_key) == ["big/big-Q4_K_M-00001-of-00002.gguf", "gemma-4b-it-Q4_K_M.gguf",
                              "gemma-4b-it-Q8_0.gguf", "text/plain-Q4_K_M.gguf"], "no projector is a unit"
    q4 = by_key["gemma-4b-it-Q4_K_M.gguf"]
    assert q4.projector == "mmproj-model-f16.gguf"
    assert [f.name for f in q4.files] == ["gemma-4b-it-Q4_K_M.gguf", "mmproj-model-f16.gguf"]
    assert q4.files[1].url == f"{ENDPOINT}/o/m/resolve/main/mmproj-model-f16.gguf"
    assert (q4.files[1].sha256, q4.files[1].size) == (f"{3:064x}", 103)
    assert q4.size == 100 + 103, "the unit's size counts the projector"
    assert q4.source == f"{ENDPOINT}/o/m/resolve/main/gemma-4b-it-Q4_K_M.gguf", "known by the model's address"
    split = by_key["big/big-Q4_K_M-00001-of-00002.gguf"]
    assert split.projector == "mmproj-big-f32.gguf", "the name it shares with the model beats F16"
    assert len(split.files) == 3
    assert by_key["text/plain-Q4_K_M.gguf"].projector is None, "a projector in another folder is not its"
    assert choose(units, "mmproj-model-f16.gguf") is None, "a projector is never a choice of its own"


def test_a_unit_written_by_an_earlier_kestrel_reads_as_text_only_and_a_projector_survives_the_round_trip() -> None:
    [unit] = group_units("o/m", "main", ENDPOINT, listed("m.gguf", "mmproj-m-f16.gguf"))

    again = DownloadUnit.from_dict(unit.to_dict())
    older = unit.to_dict()
    del older["projector"]
    older["files"] = older["files"][:1]

    assert again == unit and again.projector == "mmproj-m-f16.gguf"
    assert DownloadUnit.from_dict(older).projector is None
    damaged = {**unit.to_dict(), "projector": "elsewhere.gguf"}
    with pytest.raises(ValueError):
        DownloadUnit.from_dict(damaged)


def test_a_fetch_downloads_the_model_and_its_projector_and_registers_the_pair(
        server: TestServer, storage: TestServer, tmp_path: Path) -> None:
    library = ModelLibrary(tmp_path / "models")
    model = write_text_model(tmp_path / "src" / "tiny-Q8_0.gguf", embedding_length=64).read_bytes()
    projector = write_projector(tmp_path / "src" / "mmproj-tiny-f16.gguf", projection_dim=64).read_bytes()
    endpoint = hugging_face_repo(server, storage, "o/tiny-GGUF",
                                 {"tiny-Q8_0.gguf": model, "mmproj-tiny-f16.gguf": projector})
    [unit] = units_for("o/tiny-GGUF", endpoint)

    fetched = fetch_unit(library, unit, options=FAST)

    got = fetched.model
    folder = library.root / got.id
    assert (got.path, got.projector, got.files) == (folder / "tiny-Q8_0.gguf", folder / "mmproj-tiny-f16.gguf", ())
    assert got.sha256 == sha256_of(model), "the model's own checksum, not the projector's"
    assert got.size == len(model)
    assert (folder / "mmproj-tiny-f16.gguf").read_bytes() == projector
    assert json.loads((folder / METADATA_FILE).read_text())["projector"] == "mmproj-tiny-f16.gguf"
    assert len(storage.requests("GET")) == 2
    listed_again = library.get(got.id)
    assert listed_again is not None and listed_again.vision


def test_a_downloaded_projector_that_does_not_fit_the_model_is_deleted_and_the_model_kept_text_only(
        server: TestServer, storage: TestServer, tmp_path: Path) -> None:
    library = ModelLibrary(tmp_path / "models")
    model = write_text_model(tmp_path / "src" / "tiny.gguf", embedding_length=64).read_bytes()
    wide = write_projector(tmp_path / "src" / "mmproj.gguf", projection_dim=2048).read_bytes()
    endpoint = hugging_face_repo(server, storage, "o/tiny-GGUF", {"tiny.gguf": model, "mmproj-f16.gguf": wide})
    [unit] = units_for("o/tiny-GGUF", endpoint)
    assert unit.projector == "mmproj-f16.gguf"

    got = fetch_unit(library, unit, options=FAST).model

    assert (got.projector, got.vision) == (None, False)
    assert sorted(p.name for p in (library.root / got.id).iterdir()) == [METADATA_FILE, "tiny.gguf"]


def test_a_downloaded_older_projector_is_kept_whatever_its_width_field_says(
        server: TestServer, storage: TestServer, tmp_path: Path) -> None:
    library = ModelLibrary(tmp_path / "models")
    model = write_text_model(tmp_path / "src" / "tiny.gguf", embedding_length=64).read_bytes()
    older = write_projector(tmp_path / "src" / "mmproj.gguf", projection_dim=768, legacy=True).read_bytes()
    endpoint = hugging_face_repo(server, storage, "o/tiny-GGUF", {"tiny.gguf": model, "mmproj-f16.gguf": older})
    [unit] = units_for("o/tiny-GGUF", endpoint)

    got = fetch_unit(library, unit, options=FAST).model

    assert got.projector is not None and got.vision
    assert got.projector.read_bytes() == older


def catalog_raw(**changes: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "id": "m", "name": "M", "publisher": "P", "license": "mit", "parameters": "4B",
        "quantization": "Q4_K_M", "format": "gguf", "context_length": 4096, "repo": "o/m",
        "revision": "0123456789abcdef0123456789abcdef01234567", "files": [{"path": "m.gguf", "size": 1000}],
        "instruct": True, "recommended": False, "description": "d",
        "capabilities": ["tools"], "projector": {"path": "mmproj-m-f16.gguf", "sha256": SHA, "size": 300}}
    entry.update(changes)
    return entry


def test_a_catalog_entry_names_its_projector_and_then_sees_counts_it_and_downloads_it() -> None:
    entry = parse_entry(catalog_raw())

    assert entry.projector == CatalogFile("mmproj-m-f16.gguf", SHA, 300)
    assert entry.size == 1300
    assert entry.capabilities == ("vision", "tools"), "a projector gives sight, said or not"
    unit = catalog_unit(entry, ENDPOINT)
    assert unit.projector == "mmproj-m-f16.gguf" and unit.size == 1300
    assert unit.files[1].url == f"{ENDPOINT}/o/m/resolve/{entry.revision}/mmproj-m-f16.gguf"
    assert (unit.files[1].sha256, unit.files[1].size) == (SHA, 300)
    assert unit.source == unit.files[0].url
    assert parse_entry(catalog_raw(projector=None)).projector is None
    assert parse_entry(catalog_raw(projector={"path": "mmproj.gguf"})).size is None, "a size unknown"


@pytest.mark.parametrize("projector, fmt, words", [
    ({"path": "mmproj.gguf", "sha256": "xyz"}, "gguf", "the SHA-256 of mmproj.gguf is not 64 hexadecimal digits"),
    ({"path": "mmproj.bin"}, "gguf", "the projector 'mmproj.bin' is not a .gguf file"),
    ({"path": "../mmproj.gguf"}, "gguf", "is not a plain relative path"),
    ({"path": "m.gguf"}, "gguf", "is also listed as a model file"),
    ({"path": "mmproj.gguf", "size": -1}, "gguf", "the size of mmproj.gguf is not a positive whole number"),
    ("mmproj.gguf", "gguf", "a file has no path"),
])
def test_a_damaged_projector_skips_the_entry_with_its_reason(projector: object, fmt: str, words: str) -> None:
    with pytest.raises(CatalogEntryError, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse_entry(catalog_raw(projector=projector, format=fmt))


def test_an_onnx_entry_cannot_have_a_projector(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    onnx = catalog_raw(format="onnx", files=[{"path": "cpu/genai_config.json"}], projector={"path": "p.gguf"})
    catalog.write_text(json.dumps({"version": 1, "models": [onnx, catalog_raw(id="fine")]}))
    problems: list[str] = []

    entries = load_catalog(catalog, problems)

    assert [e.id for e in entries] == ["fine"]
    assert problems == ["Catalog entry 1 was skipped: only a GGUF entry can have a vision projector."]
