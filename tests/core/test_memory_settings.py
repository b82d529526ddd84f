"""Memory's settings: on, ask, API off by default; the round trip through settings.json; a bad value reset alone."""

from __future__ import annotations

import json
from pathlib import Path

from app.core.memory_settings import MemoryProposal, MemorySettings
from app.core.settings import Settings, SettingsFile


def test_the_defaults_use_memory_ask_before_keeping_and_leave_the_api_out() -> None:
    assert Settings().memory == MemorySettings(enabled=True, propose=MemoryProposal.ASK, api_uses_memory=False)


def test_every_field_round_trips_through_the_file(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    chosen = Settings(memory=MemorySettings(enabled=False, propose=MemoryProposal.AUTOMATIC, api_uses_memory=True))
    SettingsFile(path).save(chosen)
    assert json.loads(path.read_text(encoding="utf-8"))["memory"] == \
        {"enabled": False, "propose": "automatic", "api_uses_memory": True}
    reading = SettingsFile(path)
    assert reading.load() == chosen and reading.last_problem is None


def test_a_bad_value_is_reset_alone_and_named(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"version": 1, "theme": "dark",
                                "memory": {"enabled": False, "propose": "sometimes", "api_uses_memory": "yes"}}),
                    encoding="utf-8")
    reading = SettingsFile(path)
    settings = reading.load()
    assert settings.theme == "dark" and settings.memory == MemorySettings(enabled=False)
    assert reading.last_problem is not None
    assert "memory.propose" in reading.last_problem and "memory.api_uses_memory" in reading.last_problem


def test_a_memory_group_that_is_no_object_is_reset(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"memory": ["on"]}), encoding="utf-8")
    reading = SettingsFile(path)
    assert reading.load().memory == MemorySettings() and "memory" in (reading.last_problem or "")
