"""A model's device and prompt-lookup settings: enums in memory, the same strings in model.json."""

from __future__ import annotations

import json
from pathlib import Path

from app.core.settings import DevicePreference, PromptLookupMode
from app.library.model_defaults import ModelDefaults, parse_value
from app.library.models import METADATA_FILE, ModelLibrary


def _library_with(tmp_path: Path, defaults: dict[str, object]) -> ModelLibrary:
    """A library whose one model has a model.json as an earlier Kestrel wrote it."""
    folder = tmp_path / "models" / "tiny"
    folder.mkdir(parents=True)
    (folder / "tiny.gguf").write_bytes(b"GGUF" + bytes(60))
    (folder / METADATA_FILE).write_text(json.dumps({
        "path": "tiny.gguf", "title": "Tiny", "size": 64, "sha256": None, "source": "test",
        "added": 0, "defaults": defaults}), encoding="utf-8")
    return ModelLibrary(tmp_path / "models")


def test_a_model_json_written_before_loads_as_enums(tmp_path: Path) -> None:
    [model] = _library_with(tmp_path, {"device_preference": "cpu", "prompt_lookup": "off",
                                       "temperature": 0.2}).list()

    assert model.defaults.device_preference is DevicePreference.CPU
    assert model.defaults.prompt_lookup is PromptLookupMode.OFF
    assert model.defaults.temperature == 0.2


def test_an_unknown_value_in_model_json_is_dropped_and_the_rest_kept(tmp_path: Path) -> None:
    [model] = _library_with(tmp_path, {"device_preference": "tpu", "prompt_lookup": "auto",
                                       "temperature": 0.2}).list()

    # auto is the app's setting's value, never a model's own: it was refused before too.
    assert model.defaults == ModelDefaults(temperature=0.2)


def test_the_enums_are_written_back_as_the_same_strings() -> None:
    defaults = ModelDefaults(device_preference=DevicePreference.GPU, prompt_lookup=PromptLookupMode.ON)

    written = json.loads(json.dumps(defaults.to_dict()))

    assert written == {"device_preference": "gpu", "prompt_lookup": "on"}
    assert ModelDefaults.from_dict(written) == defaults


def test_a_typed_value_becomes_the_enum() -> None:
    assert parse_value("device_preference", "npu") is DevicePreference.NPU
    assert parse_value("prompt_lookup", "on") is PromptLookupMode.ON
