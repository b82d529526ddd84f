"""A catalog model's recommended sampling: read and checked from the catalog, and a model's defaults once installed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.core.generation import GenerationSettings
from app.library import recommended_sampling
from app.library.catalog import CatalogSampling, find_entry, load_catalog
from app.library.fetch import fetch_unit
from app.library.huggingface.hub import catalog_unit
from app.library.importer import import_model_file
from app.library.model_defaults import ModelDefaults
from app.library.models import ModelLibrary
from app.library.starter import STARTER_ID, STARTER_SHA256
from tests.helpers.http_servers import TestServer, hugging_face_repo, sha256_of
from tests.library.test_fetch import FAST

SAMPLING = {"temperature": 0.3, "top_p": 0.85, "top_k": 30, "repeat_penalty": 1.05}


def entry(sha256: str = "a" * 64, size: int = 1000, **extra: Any) -> dict[str, Any]:
    return {"id": "tiny-q8", "name": "Tiny", "publisher": "Nobody", "license": "mit", "parameters": "1M",
            "quantization": "Q8_0", "format": "gguf", "context_length": 2048, "repo": "o/tiny-GGUF",
            "revision": "main", "files": [{"path": "tiny.gguf", "sha256": sha256, "size": size}],
            "instruct": True, "recommended": False, "description": "A tiny model.", **extra}


def catalog_file(tmp_path: Path, *entries: dict[str, Any]) -> Path:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"version": 1, "models": list(entries)}), encoding="utf-8")
    return path


def test_the_shipped_catalog_gives_sampling_only_with_its_source() -> None:
    entries = load_catalog()
    qwen3 = find_entry(entries, "qwen3-4b-q4_k_m")
    assert qwen3 is not None and qwen3.sampling is not None
    assert (qwen3.sampling.temperature, qwen3.sampling.top_p, qwen3.sampling.top_k) == (0.6, 0.95, 20)
    assert "generation_config.json" in qwen3.sampling.source
    starter = find_entry(entries, STARTER_ID)
    assert starter is not None and starter.files[0].sha256 == STARTER_SHA256 and starter.sampling is not None
    unverified = find_entry(entries, "qwen3-8b-q4_k_m")
    assert unverified is not None and unverified.sampling is None, "left unset where no source was found"
    assert all(e.sampling is None or e.sampling.source for e in entries)


def test_sampling_is_read_with_its_source(tmp_path: Path) -> None:
    problems: list[str] = []
    [read] = load_catalog(catalog_file(tmp_path, entry(sampling=dict(SAMPLING, min_p=0.05),
                                                       sampling_source="the card")), problems)
    assert problems == []
    assert read.sampling == CatalogSampling("the card", 0.3, 0.85, 30, 1.05, 0.05)


@pytest.mark.parametrize("extra, words", [
    ({"sampling": {"temperature": "warm"}, "sampling_source": "x"}, "sampling temperature must be a number from 0 to 5 (got 'warm')"),
    ({"sampling": {"temperature": 7}, "sampling_source": "x"}, "sampling temperature must be a number from 0 to 5 (got 7)"),
    ({"sampling": {"top_p": 0}, "sampling_source": "x"}, "sampling top_p must be a number above 0 and at most 1 (got 0)"),
    ({"sampling": {"top_k": 2.5}, "sampling_source": "x"}, "sampling top_k must be a whole number, 0 or more (got 2.5)"),
    ({"sampling": {"top_k": True}, "sampling_source": "x"}, "sampling top_k must be a whole number"),
    ({"sampling": {"repeat_penalty": 0.1}, "sampling_source": "x"}, "sampling repeat_penalty must be a number from 0.5 to 3"),
    ({"sampling": {"min_p": 2}, "sampling_source": "x"}, "sampling min_p must be a number from 0 to 1 (got 2)"),
    ({"sampling": {"typical_p": 0.9}, "sampling_source": "x"}, "sampling has 'typical_p', which Kestrel does not know"),
    ({"sampling": SAMPLING}, "sampling has no sampling_source: say where the values were read"),
    ({"sampling": SAMPLING, "sampling_source": " "}, "sampling has no sampling_source"),
    ({"sampling_source": "the card"}, "sampling_source is given without a sampling"),
    ({"sampling": {}, "sampling_source": "x"}, "sampling must be an object of temperature"),
    ({"sampling": [0.7], "sampling_source": "x"}, "sampling must be an object of temperature"),
])
def test_a_bad_sampling_skips_the_entry_in_words(tmp_path: Path, extra: dict[str, Any], words: str) -> None:
    problems: list[str] = []
    assert load_catalog(catalog_file(tmp_path, entry(**extra)), problems) == ()
    assert len(problems) == 1 and problems[0].startswith("Catalog entry 1 was skipped: ") and words in problems[0]


def test_a_model_downloaded_from_the_catalog_starts_new_chats_with_its_sampling(
        server: TestServer, storage: TestServer, tmp_path: Path, tiny_model: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    body = tiny_model.read_bytes()
    shipped = catalog_file(tmp_path, entry(sha256_of(body), len(body), sampling=SAMPLING, sampling_source="the card"))
    monkeypatch.setattr(recommended_sampling, "CATALOG_FILE", shipped)
    [offered] = load_catalog(shipped)
    library = ModelLibrary(tmp_path / "models")

    fetched = fetch_unit(library, catalog_unit(offered, hugging_face_repo(server, storage, "o/tiny-GGUF",
                                                                          {"tiny.gguf": body})), options=FAST)

    model = library.get(fetched.model.id)
    assert model is not None and model.sha256 == sha256_of(body)
    assert model.defaults == ModelDefaults(temperature=0.3, top_p=0.85, top_k=30, repeat_penalty=1.05)
    new_chat = model.defaults.generation(GenerationSettings(max_tokens=99))
    assert (new_chat.temperature, new_chat.top_p, new_chat.top_k, new_chat.repeat_penalty, new_chat.max_tokens) \
        == (0.3, 0.85, 30, 1.05, 99), "the model's sampling over the app's, the app's length kept"


def test_a_catalog_sha_with_min_p_fills_the_models_min_p(tmp_path: Path) -> None:
    entries = load_catalog(catalog_file(tmp_path, entry("b" * 64, sampling=dict(SAMPLING, min_p=0.05),
                                                        sampling_source="the card")))
    filled = recommended_sampling.with_recommended(ModelDefaults(), "b" * 64, entries)
    assert filled == ModelDefaults(temperature=0.3, top_p=0.85, top_k=30, repeat_penalty=1.05, min_p=0.05)
    assert filled.generation(GenerationSettings()).min_p == 0.05, "a new chat samples with it"
    own = recommended_sampling.with_recommended(ModelDefaults(min_p=0.0), "b" * 64, entries)
    assert own.min_p == 0.0, "the person's own min_p (here: off) stays theirs"
    without = load_catalog(catalog_file(tmp_path, entry("b" * 64, sampling=SAMPLING, sampling_source="the card")))
    assert recommended_sampling.with_recommended(ModelDefaults(), "b" * 64, without).min_p is None


def test_a_value_the_person_set_for_the_model_wins_over_the_recommendation(
        tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = tiny_model.read_bytes()
    monkeypatch.setattr(recommended_sampling, "CATALOG_FILE", catalog_file(
        tmp_path, entry(sha256_of(body), len(body), sampling=SAMPLING, sampling_source="the card")))
    library = ModelLibrary(tmp_path / "models")
    model = import_model_file(library, tiny_model)  # the same bytes as the catalog's, by its checksum
    assert model.defaults.temperature == 0.3

    library.set_defaults(model.id, ModelDefaults(temperature=1.2))

    again = library.get(model.id)
    assert again is not None and again.defaults.temperature == 1.2
    assert (again.defaults.top_p, again.defaults.top_k) == (0.85, 30)
    other = tmp_path / "other.gguf"
    other.write_bytes(body + b"\0")
    assert import_model_file(library, other).defaults == ModelDefaults(), "other bytes get nothing"
