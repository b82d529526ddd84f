"""The curated catalog: the shipped file reads whole, a damaged entry is skipped with a reason."""

from __future__ import annotations

import json
from pathlib import Path

from app.library.catalog import CatalogFile, find_entry, load_catalog, recommended_entry


def test_the_shipped_catalog_reads_without_a_problem() -> None:
    problems: list[str] = []
    entries = load_catalog(problems=problems)

    assert problems == [] and 5 <= len(entries) <= 7
    assert {e.format for e in entries} == {"gguf", "onnx"}
    recommended = recommended_entry(entries)
    assert recommended is not None and recommended.format == "gguf" and recommended.instruct
    assert recommended.size is not None, "the first-run offer shows its size"
    assert all(e.instruct for e in entries)
    onnx = next(e for e in entries if e.format == "onnx")
    assert any(f.path.endswith("/genai_config.json") for f in onnx.files)
    assert find_entry(entries, recommended.id.upper()) == recommended


def good(**changes: object) -> dict:
    entry = {"id": "m", "name": "M", "publisher": "P", "license": "mit", "parameters": "1B",
             "quantization": "Q4_K_M", "format": "gguf", "context_length": 4096, "repo": "o/m",
             "revision": "main", "files": [{"path": "m.gguf", "size": 10}], "instruct": True,
             "recommended": False, "description": "d"}
    entry.update(changes)
    return entry


def test_a_damaged_entry_is_skipped_with_its_reason(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"version": 1, "models": [
        good(),
        good(id="no-name", name=""),
        good(id="bad-format", format="safetensors"),
        good(id="bad-sha", files=[{"path": "m.gguf", "sha256": "xyz"}]),
        good(id="escape", files=[{"path": "../m.gguf"}]),
        good(id="onnx-without-config", format="onnx", files=[{"path": "f/model.onnx"}]),
        good(id="bad-context", context_length=-1),
        good(),  # the same id again
        "not an object",
    ]}))
    problems: list[str] = []

    entries = load_catalog(catalog, problems)

    assert [e.id for e in entries] == ["m"] and entries[0].size == 10
    assert entries[0].files == (CatalogFile("m.gguf", None, 10),)
    assert problems == [
        "Catalog entry 2 was skipped: name is missing or empty.",
        "Catalog entry 3 was skipped: format 'safetensors' is neither \"gguf\" nor \"onnx\".",
        "Catalog entry 4 was skipped: the SHA-256 of m.gguf is not 64 hexadecimal digits.",
        "Catalog entry 5 was skipped: the file path '../m.gguf' is not a plain relative path.",
        "Catalog entry 6 was skipped: an ONNX entry lists no genai_config.json.",
        "Catalog entry 7 was skipped: context_length is not a positive whole number.",
        "Catalog entry 8 was skipped: the id 'm' is used twice.",
        "Catalog entry 9 was skipped: it is not an object.",
    ]


def test_an_unreadable_catalog_offers_nothing_and_says_why(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    catalog.write_text("{not json")
    problems: list[str] = []

    assert load_catalog(catalog, problems) == () and "could not be read" in problems[0]
    assert load_catalog(tmp_path / "missing.json", problems) == ()
    catalog.write_text(json.dumps({"version": 1}))
    assert load_catalog(catalog, problems) == () and "holds no list of models" in problems[-1]
