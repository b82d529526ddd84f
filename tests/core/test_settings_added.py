"""Adding a setting is a field with its default (CONTRIBUTING.md, "Where to add: a setting"): the file
keeps it, an older file without it loads with the default, an older Kestrel reading the newer file ignores
it, and no version changes. Checked by adding one here."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.core import settings as settings_module
from app.core.settings import SETTINGS_VERSION, Settings, SettingsFile


@dataclass(frozen=True)
class WithANewSetting(Settings):
    """Settings as a later change would make them: one more field, with its default."""

    read_answers_aloud: bool = False


def test_a_new_field_with_its_default_is_kept_read_and_ignored_by_older_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "settings.json"
    older = Settings(theme="dark")
    SettingsFile(path).save(older)  # a file an older Kestrel wrote: no such key
    monkeypatch.setattr(settings_module, "Settings", WithANewSetting)

    loaded = SettingsFile(path).load()
    assert isinstance(loaded, WithANewSetting) and loaded.read_answers_aloud is False and loaded.theme == "dark"

    SettingsFile(path).save(dataclasses.replace(loaded, read_answers_aloud=True))
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["read_answers_aloud"] is True and written["version"] == SETTINGS_VERSION
    reading = SettingsFile(path)
    again = reading.load()
    assert isinstance(again, WithANewSetting) and again.read_answers_aloud is True and reading.last_problem is None

    monkeypatch.setattr(settings_module, "Settings", Settings)  # the older Kestrel reads the newer file
    back = SettingsFile(path).load()
    assert type(back) is Settings and back.theme == "dark"
