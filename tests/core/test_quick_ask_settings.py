"""Quick ask's settings and the two sign-in/tray settings: defaults, checks in plain words, the round trip
through settings.json, and a bad value reset alone."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from app.core.quick_ask_settings import DEFAULT_SHORTCUT, QuickAskSettings, shortcut_problem, split_chord
from app.core.settings import Settings, SettingsFile


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "config" / "settings.json"


def test_the_defaults_are_on_with_ctrl_alt_space_and_sign_in_off() -> None:
    settings = Settings()
    assert settings.quick_ask == QuickAskSettings(enabled=True, shortcut="Ctrl+Alt+Space", save_chats=True,
                                                  keep_model_ready=True)
    assert DEFAULT_SHORTCUT == "Ctrl+Alt+Space"
    assert (settings.start_at_sign_in, settings.told_about_tray) == (False, False)
    assert settings.validated() == settings


def test_every_field_round_trips_through_the_file(path: Path) -> None:
    chosen = Settings(quick_ask=QuickAskSettings(enabled=False, shortcut="Meta+Shift+K", save_chats=False,
                                                 keep_model_ready=False),
                      start_at_sign_in=True, told_about_tray=True)
    SettingsFile(path).save(chosen)
    on_disk = json.loads(path.read_text(encoding="utf-8"))
    assert on_disk["quick_ask"] == {"enabled": False, "shortcut": "Meta+Shift+K", "save_chats": False,
                                    "keep_model_ready": False}
    assert (on_disk["start_at_sign_in"], on_disk["told_about_tray"]) == (True, True)
    reading = SettingsFile(path)
    assert reading.load() == chosen and reading.last_problem is None


def test_an_older_file_without_them_loads_the_defaults(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "theme": "dark"}), encoding="utf-8")
    reading = SettingsFile(path)
    assert reading.load() == Settings(theme="dark") and reading.last_problem is None


@pytest.mark.parametrize("shortcut", ["Ctrl+Alt+Space", "Meta+K", "Ctrl++", "Alt+,", "Ctrl+Shift+F12", "",
                                      "Ctrl+Num+5"])
def test_a_chord_holding_ctrl_alt_or_meta_is_a_shortcut_and_empty_is_none(shortcut: str) -> None:
    assert shortcut_problem(shortcut) is None
    assert QuickAskSettings(shortcut=shortcut).validated().shortcut == shortcut


@pytest.mark.parametrize(("shortcut", "words"), [
    ("Space", "has no Ctrl, Alt or Windows key"),
    ("Shift+A", "has no Ctrl, Alt or Windows key"),
    ("Ctrl+K, Ctrl+L", "several key presses"),
    ("Ctrl+", "not a key combination"),
    ("Hyper+K", "not a key combination"),
    (" Ctrl+K", "not a key combination"),
    ("Ctrl+" + "K" * 80, "not a key combination"),
])
def test_a_shortcut_that_is_not_one_chord_with_a_modifier_is_refused_in_words(shortcut: str, words: str) -> None:
    with pytest.raises(ValueError, match=r"^quick_ask\.shortcut: ") as caught:
        QuickAskSettings(shortcut=shortcut).validated()
    assert words in str(caught.value)
    assert "Ctrl+Alt+Space" in str(caught.value)


def test_split_chord_reads_the_plus_key() -> None:
    assert split_chord("Ctrl++") == (["Ctrl"], "+")
    assert split_chord("Ctrl+Alt+Space") == (["Ctrl", "Alt"], "Space")
    assert split_chord("F5") == ([], "F5")


@pytest.mark.parametrize("name", ["enabled", "save_chats", "keep_model_ready"])
def test_a_switch_must_be_true_or_false(name: str) -> None:
    with pytest.raises(ValueError, match=rf"quick_ask\.{name} must be true or false \(got 'yes'\)"):
        dataclasses.replace(QuickAskSettings(), **{name: "yes"}).validated()


@pytest.mark.parametrize("name", ["start_at_sign_in", "told_about_tray"])
def test_the_top_level_switches_must_be_true_or_false(name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name} must be true or false \(got 1\)"):
        dataclasses.replace(Settings(), **{name: 1}).validated()


def test_bad_values_are_reset_one_by_one_and_named(path: Path) -> None:
    data = Settings(theme="dark", start_at_sign_in=True).to_dict()
    data["quick_ask"] = {"enabled": False, "shortcut": "Q", "save_chats": "no", "keep_model_ready": False,
                         "future_key": 3}
    data["told_about_tray"] = "once"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    reading = SettingsFile(path)
    loaded = reading.load()
    assert loaded == Settings(theme="dark", start_at_sign_in=True,
                              quick_ask=QuickAskSettings(enabled=False, keep_model_ready=False))
    assert reading.last_problem is not None
    for name in ("quick_ask.shortcut", "quick_ask.save_chats", "told_about_tray"):
        assert name in reading.last_problem
    assert "quick_ask.enabled" not in reading.last_problem and "future_key" not in reading.last_problem


def test_a_group_that_is_not_an_object_takes_its_defaults(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"quick_ask": "on", "theme": "light"}), encoding="utf-8")
    reading = SettingsFile(path)
    assert reading.load() == Settings(theme="light")
    assert reading.last_problem is not None and "quick_ask" in reading.last_problem


def test_settings_refuse_a_quick_ask_that_is_not_quick_ask_settings() -> None:
    with pytest.raises(TypeError, match="quick_ask must be QuickAskSettings"):
        dataclasses.replace(Settings(), quick_ask={"enabled": True}).validated()  # type: ignore[arg-type]
