"""The starter's own sampling: its defaults once assembled, and for a starter an earlier Kestrel installed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from app.core.generation import GenerationSettings
from app.library import starter
from app.library.model_defaults import ModelDefaults
from app.library.models import ModelLibrary


def test_the_starter_is_installed_with_its_sampling_as_its_defaults(tmp_path: Path, starter_model: Path) -> None:
    sampling = starter.starter_sampling()
    assert sampling is not None and "generation_config.json" in sampling.source
    library = ModelLibrary(tmp_path / "models")

    installed = starter.install_starter(library)

    wanted = ModelDefaults(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                           repeat_penalty=sampling.repeat_penalty)
    assert installed.defaults == wanted, "the model that loads at once has them"
    assert library.get(starter.STARTER_ID).defaults == wanted, "and every later read"  # type: ignore[union-attr]
    new_chat = installed.defaults.generation(GenerationSettings())
    assert (new_chat.temperature, new_chat.top_p, new_chat.top_k, new_chat.repeat_penalty) \
        == (sampling.temperature, sampling.top_p, sampling.top_k, sampling.repeat_penalty)
    assert new_chat != GenerationSettings(), "not the window's own defaults any more"


def _as_an_earlier_kestrel_left_it(library: ModelLibrary, starter_model: Path, defaults: dict[str, object]) -> None:
    """The starter's folder and model.json as Kestrel wrote them before it knew any sampling
    (the keys of that version's InstalledModel.to_json), with the defaults a person set."""
    folder = library.root / starter.STARTER_ID
    folder.mkdir(parents=True)
    target = folder / starter.STARTER_FILE
    try:
        os.link(starter_model, target)  # the same 1.1 GB, without copying them
    except OSError:
        shutil.copy(starter_model, target)
    data: dict[str, object] = {"title": starter.STARTER_TITLE, "path": starter.STARTER_FILE,
                               "size": starter.STARTER_BYTES, "sha256": starter.STARTER_SHA256,
                               "source": "starter package", "added": 1_700_000_000.0, "format": "gguf"}
    if defaults:
        data["defaults"] = defaults
    (folder / "model.json").write_text(json.dumps(data, indent=2), encoding="utf-8")


def test_a_starter_an_earlier_kestrel_installed_gets_them_and_keeps_what_the_person_set(
        tmp_path: Path, starter_model: Path) -> None:
    sampling = starter.starter_sampling()
    assert sampling is not None
    plain = ModelLibrary(tmp_path / "plain")
    _as_an_earlier_kestrel_left_it(plain, starter_model, {})
    chosen = ModelLibrary(tmp_path / "chosen")
    _as_an_earlier_kestrel_left_it(chosen, starter_model, {"temperature": 0.2, "context_length": 2048})

    untouched = plain.get(starter.STARTER_ID)
    theirs = chosen.get(starter.STARTER_ID)

    assert untouched is not None and (untouched.defaults.temperature, untouched.defaults.top_k) \
        == (sampling.temperature, sampling.top_k)
    assert theirs is not None and (theirs.defaults.temperature, theirs.defaults.context_length) == (0.2, 2048)
    assert (theirs.defaults.top_p, theirs.defaults.repeat_penalty) == (sampling.top_p, sampling.repeat_penalty)
    assert json.loads((chosen.root / starter.STARTER_ID / "model.json").read_text())["defaults"] \
        == {"temperature": 0.2, "context_length": 2048}, "nothing is written to find them"
