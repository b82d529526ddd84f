"""Tests for Settings and SettingsFile: defaults, round trip, atomic save, bad files."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from app.core import settings as settings_module
from app.core.generation import GenerationSettings
from app.core.settings import SETTINGS_VERSION, Settings, SettingsError, SettingsFile


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "config" / "settings.json"


def _custom() -> Settings:
    return Settings(
        default_model="gemma-3-270m",
        generation=GenerationSettings(temperature=0.3, max_tokens=2048, seed=7),
        threads=6,
        device_preference="gpu",
        theme="dark",
    )


def test_missing_file_gives_defaults_and_creates_nothing(path: Path) -> None:
    file = SettingsFile(path)
    assert file.load() == Settings()
    assert file.last_problem is None
    assert not path.parent.exists()


def test_defaults() -> None:
    defaults = Settings()
    assert defaults.version == SETTINGS_VERSION == 1
    assert (defaults.default_model, defaults.threads) == (None, None)
    assert (defaults.device_preference, defaults.theme) == ("auto", "system")
    assert defaults.generation == GenerationSettings()


def test_round_trip(path: Path) -> None:
    SettingsFile(path).save(_custom())
    file = SettingsFile(path)
    assert file.load() == _custom()
    assert file.last_problem is None
    on_disk = json.loads(path.read_text(encoding="utf-8"))
    assert on_disk["version"] == SETTINGS_VERSION
    assert on_disk["generation"]["temperature"] == 0.3


def test_save_replaces_the_file_and_leaves_no_temporary_files(path: Path) -> None:
    file = SettingsFile(path)
    file.save(Settings())
    first_inode = path.stat().st_ino
    file.save(_custom())
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]
    # os.replace puts a new file in place; the old one is never written in place.
    assert path.stat().st_ino != first_inode
    assert SettingsFile(path).load() == _custom()


def test_failed_save_keeps_the_old_file(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = SettingsFile(path)
    file.save(_custom())
    before = path.read_bytes()

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(settings_module.os, "replace", refuse)
    with pytest.raises(SettingsError, match="could not save its settings") as caught:
        file.save(Settings())
    assert "No space left on device" in str(caught.value)
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]


def test_save_refuses_invalid_settings(path: Path) -> None:
    with pytest.raises(ValueError, match="theme must be one of system, light, dark"):
        SettingsFile(path).save(Settings(theme="purple"))
    with pytest.raises(ValueError, match="threads must be"):
        SettingsFile(path).save(Settings(threads=0))
    with pytest.raises(ValueError, match="temperature"):
        SettingsFile(path).save(Settings(generation=GenerationSettings(temperature=-1)))
    assert not path.exists()


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"\xff\xfe\x00garbage", b"[1, 2, 3]", b""],
    ids=["bad-json", "not-utf8", "not-an-object", "empty"],
)
def test_corrupt_file_is_set_aside(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    file = SettingsFile(path)
    assert file.load() == Settings()
    assert file.last_problem is not None
    assert "damaged" in file.last_problem
    (aside,) = path.parent.glob("settings.json.bad-*")
    assert aside.read_bytes() == content
    assert aside.name in file.last_problem
    assert not path.exists()
    # Saving afterwards starts a fresh, good file.
    file.save(_custom())
    assert SettingsFile(path).load() == _custom()


def test_two_corrupt_files_in_one_second_are_both_kept(path: Path) -> None:
    path.parent.mkdir(parents=True)
    for content in (b"{one", b"{two"):
        path.write_bytes(content)
        SettingsFile(path).load()
    kept = sorted(p.read_bytes() for p in path.parent.glob("settings.json.bad-*"))
    assert kept == [b"{one", b"{two"]


def test_unknown_keys_are_ignored(path: Path) -> None:
    data = _custom().to_dict()
    data["telemetry"] = True
    data["generation"]["mirostat_tau"] = 5.0
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    file = SettingsFile(path)
    assert file.load() == _custom()
    assert file.last_problem is None


def test_missing_keys_take_defaults(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"theme": "light", "generation": {"top_k": 10}}))
    loaded = SettingsFile(path).load()
    assert loaded == Settings(theme="light", generation=GenerationSettings(top_k=10))


def test_invalid_values_are_reset_one_by_one(path: Path) -> None:
    data = _custom().to_dict()
    data["theme"] = "purple"
    data["threads"] = "many"
    data["generation"]["temperature"] = 99
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    file = SettingsFile(path)
    loaded = file.load()
    assert loaded == dataclasses.replace(
        _custom(),
        theme="system",
        threads=None,
        generation=dataclasses.replace(_custom().generation, temperature=0.7),
    )
    assert file.last_problem is not None
    for name in ("theme", "threads", "temperature"):
        assert name in file.last_problem
    assert path.exists()


def test_file_from_a_newer_version_is_read_never_written_and_the_user_is_told(path: Path) -> None:
    data = _custom().to_dict()
    data["version"] = SETTINGS_VERSION + 1
    data["future_setting"] = {"nested": True}
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    before = path.read_bytes()

    file = SettingsFile(path)
    loaded = file.load()
    assert loaded == _custom()
    assert loaded.version == SETTINGS_VERSION
    assert file.last_problem is not None and "newer version of Kestrel" in file.last_problem
    file.save(loaded)
    assert path.read_bytes() == before

    with pytest.raises(SettingsError, match="This change was not saved"):
        file.save(dataclasses.replace(loaded, theme="light"))
    assert path.read_bytes() == before


@pytest.mark.skipif(os.name == "nt", reason="Windows cannot fsync a folder")
def test_file_then_folder_are_synced(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[tuple[int, int]] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        info = os.fstat(fd)
        synced.append((info.st_dev, info.st_ino))
        real_fsync(fd)

    monkeypatch.setattr(settings_module.os, "fsync", recording_fsync)
    SettingsFile(path).save(_custom())
    monkeypatch.undo()
    target, folder = path.stat(), path.parent.stat()
    # The temporary file (now renamed to the target) first, then the folder holding it.
    assert synced == [(target.st_dev, target.st_ino), (folder.st_dev, folder.st_ino)]


def test_json_nested_too_deep_is_a_damaged_file_set_aside(path: Path) -> None:
    """The robustness campaign found it: json.loads raised RecursionError, not ValueError."""
    path.parent.mkdir(parents=True)
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    file = SettingsFile(path)
    assert file.load() == Settings()
    assert file.last_problem is not None and "damaged" in file.last_problem
    assert not path.exists() and list(path.parent.glob(f"{path.name}.bad-*"))


def test_what_the_background_does_is_one_of_its_choices(path: Path) -> None:
    assert (Settings().when_hidden, Settings().when_in_background) == ("pause", "full")
    with pytest.raises(ValueError, match="when_hidden must be one of pause, gently, full"):
        Settings(when_hidden="sleep").validated()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"version": 1, "when_hidden": "gently", "when_in_background": "turbo"}', encoding="utf-8")
    loaded = SettingsFile(path).load()
    assert (loaded.when_hidden, loaded.when_in_background) == ("gently", "full")  # the bad one took its default
