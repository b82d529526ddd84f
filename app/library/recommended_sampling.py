"""The sampling a model's authors recommend, found by its file's SHA-256 in the catalog, under the model's own defaults."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from app.library.catalog import CATALOG_FILE, CatalogEntry, CatalogSampling, load_catalog
from app.library.model_defaults import ModelDefaults

# The sampling fields a recommendation fills: every one CatalogSampling carries.
_FIELDS = ("temperature", "top_p", "top_k", "repeat_penalty", "min_p")


def sampling_for(sha256: str | None, entries: tuple[CatalogEntry, ...] | None = None) -> CatalogSampling | None:
    """The recommended sampling of the model whose single file has this SHA-256 (the same
    bytes as a catalog entry's, the starter's among them); None when none is known."""
    if not sha256:
        return None
    by_sha = _by_sha(entries) if entries is not None else _shipped(CATALOG_FILE)
    return by_sha.get(sha256.lower())


def with_recommended(defaults: ModelDefaults, sha256: str | None,
                     entries: tuple[CatalogEntry, ...] | None = None) -> ModelDefaults:
    """The model's own defaults with its authors' sampling filling the fields it leaves unset.

    Looked up each time model.json is read rather than written into it at install, so a
    model installed before Kestrel knew the recommendation (the starter of an earlier
    version) gets it too, a correction in a later catalog reaches it, and a value the person
    set for the model stays theirs. A chat's own settings go over both.
    """
    sampling = sampling_for(sha256, entries)
    if sampling is None:
        return defaults
    filled = {name: getattr(sampling, name) for name in _FIELDS
              if getattr(defaults, name) is None and getattr(sampling, name) is not None}
    return dataclasses.replace(defaults, **filled) if filled else defaults


def _by_sha(entries: tuple[CatalogEntry, ...]) -> dict[str, CatalogSampling]:
    """Entries of one file with a recommendation, by that file's SHA-256 (a split or ONNX
    model is not one file, and is matched by nothing)."""
    return {entry.files[0].sha256: entry.sampling for entry in entries
            if entry.sampling is not None and len(entry.files) == 1 and entry.files[0].sha256}


@functools.lru_cache(maxsize=4)
def _shipped(path: Path) -> dict[str, CatalogSampling]:
    """The shipped catalog's recommendations, read once: model.json is read on every listing."""
    return _by_sha(load_catalog(path))
