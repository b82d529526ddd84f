"""Device preference and prompt lookup are enums in memory and the same strings on disk."""

from __future__ import annotations

import json
from pathlib import Path

from app.core.settings import DevicePreference, PromptLookupMode, Settings, SettingsFile

# A settings.json as Kestrel wrote it before these settings were enums (keys trimmed).
WRITTEN_BEFORE = {
    "version": 1, "default_model": None, "threads": None, "device_preference": "gpu",
    "theme": "dark", "when_hidden": "pause", "when_in_background": "full",
    "prompt_lookup": "on", "saved_states_mb": 2048,
}


def test_a_file_written_before_loads_as_enums(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(WRITTEN_BEFORE), encoding="utf-8")

    file = SettingsFile(path)
    loaded = file.load()

    assert file.last_problem is None
    assert loaded.device_preference is DevicePreference.GPU
    assert loaded.prompt_lookup is PromptLookupMode.ON


def test_the_enums_are_written_as_the_same_strings(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    SettingsFile(path).save(Settings(device_preference=DevicePreference.CPU, prompt_lookup=PromptLookupMode.OFF))

    on_disk = json.loads(path.read_text(encoding="utf-8"))

    assert (on_disk["device_preference"], on_disk["prompt_lookup"]) == ("cpu", "off")
    assert type(on_disk["device_preference"]) is str


def test_an_unknown_value_takes_the_default_and_says_which(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({**WRITTEN_BEFORE, "device_preference": "tpu", "prompt_lookup": 3}),
                    encoding="utf-8")

    file = SettingsFile(path)
    loaded = file.load()

    assert loaded.device_preference is DevicePreference.AUTO
    assert loaded.prompt_lookup is PromptLookupMode.AUTO
    assert file.last_problem is not None
    assert "device_preference, prompt_lookup" in file.last_problem
    assert loaded.theme == "dark", "the valid settings beside them are kept"


def test_text_given_in_code_becomes_the_enum_once_checked() -> None:
    # The settings dialog reads its choices back from Qt as plain text.
    checked = Settings(device_preference="npu", prompt_lookup="off").validated()  # type: ignore[arg-type]

    assert checked.device_preference is DevicePreference.NPU
    assert checked.prompt_lookup is PromptLookupMode.OFF
