"""The settings dialog's saved chat states (disk budget, clear), prompt-lookup choice and comfortable reading speed."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from app.core.settings import Settings
from app.engine.backends.llama import kv_state
from app.engine.backends.llama.kv_state import StateKey
from app.service.models import kv_cache
from app.ui.settings.dialogs import SettingsDialog
from app.ui.state.model_items import InstalledModelsModel
from tests.ui.conftest import run, service_of, until

KEY = StateKey("model.gguf|1|2", 2048, "template", "0.3.36")


def _saved_states(count: int, size: int = 3000) -> list[Path]:
    """count state files in the cache folder, as the engine writes them."""
    folder = kv_cache.states_folder()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in range(count):
        path = folder / f"{KEY.name}-{n}{kv_state.SUFFIX}"
        kv_state.write_file(path, KEY, tuple(range(1, 100 + n)), b"x" * size, False, secret=b"k" * 32)
        paths.append(path)
    return paths


class _ModelDoor:
    """Stands in for the ModelDoor: clear_saved_states waits until let go, then clears."""

    def __init__(self) -> None:
        self.calls = 0
        self.go_on = asyncio.Event()
        self.model = None  # no model in use: the Quick ask page says what keeping one costs in general
        self.loaded = None  # ...and the thinking default has no model to say it cannot follow it

    async def hardware_overview(self) -> None:
        raise RuntimeError("no engine here: the Device box stays as it is")

    async def clear_saved_states(self) -> None:
        self.calls += 1
        await self.go_on.wait()
        await asyncio.to_thread(kv_cache.clear)


class _Adapter:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.installed = InstalledModelsModel()  # the window's list of models, empty

    def spawn(self, coroutine):
        return self._loop.create_task(coroutine)


def test_the_budget_and_prompt_lookup_round_trip_into_the_settings(qtbot) -> None:
    settings = Settings(saved_states_mb=512, prompt_lookup="off")
    dialog = SettingsDialog(settings, None)
    qtbot.addWidget(dialog)
    assert dialog.saved_states.value() == 512 and dialog.prompt_lookup.currentData() == "off"
    assert dialog.value() == settings  # unchanged controls give back the same settings
    dialog.saved_states.setValue(0)  # shown as off
    assert dialog.saved_states.text() == "off (chats are read again when reopened)"
    dialog.prompt_lookup.setCurrentIndex(dialog.prompt_lookup.findData("on"))
    changed = dialog.value()
    assert (changed.saved_states_mb, changed.prompt_lookup) == (0, "on")
    assert changed == dataclasses.replace(settings, saved_states_mb=0, prompt_lookup="on")
    assert changed.validated() == changed
    defaults = SettingsDialog(Settings(), None)
    qtbot.addWidget(defaults)
    assert defaults.prompt_lookup.currentData() == "auto" and defaults.saved_states.value() == 2048
    assert not defaults.clear_states.isEnabled()  # no service to ask


def test_the_comfortable_reading_speed_round_trips_into_the_settings(qtbot) -> None:
    """The speed the model manager's verdicts judge by (runs well / usable / slow): shown from the
    settings, given back changed, and a value the box rounds kept as it was unless changed."""
    settings = Settings(comfortable_tokens_per_s=25.0)
    dialog = SettingsDialog(settings, None)
    qtbot.addWidget(dialog)
    box = dialog.comfortable_speed
    assert (box.value(), box.minimum(), box.maximum(), box.suffix()) == (25.0, 1.0, 1000.0, " tokens/s")
    assert dialog.value() == settings
    box.setValue(4.5)
    changed = dialog.value()
    assert changed == dataclasses.replace(settings, comfortable_tokens_per_s=4.5) and changed.validated() == changed
    box.setValue(5000)  # past the range the settings accept: held at its top
    assert dialog.value().comfortable_tokens_per_s == 1000.0
    odd = Settings(comfortable_tokens_per_s=12.345)  # set in settings.json, finer than the box shows
    kept = SettingsDialog(odd, None)
    qtbot.addWidget(kept)
    assert kept.value().comfortable_tokens_per_s == 12.345
    defaults = SettingsDialog(Settings(), None)
    qtbot.addWidget(defaults)
    assert defaults.comfortable_speed.value() == Settings().comfortable_tokens_per_s == 10.0


def test_clear_asks_the_service_without_waiting_for_it_and_says_what_it_freed(qtbot, loop) -> None:
    paths = _saved_states(2)
    size = sum(p.stat().st_size for p in paths)
    adapter = _Adapter(loop)
    model = _ModelDoor()
    dialog = SettingsDialog(Settings(), None, adapter=adapter, model=model)
    qtbot.addWidget(dialog)
    run(loop, until(lambda: dialog.states_note.text() != "", what="the disk the states take"))
    assert dialog.states_note.text().startswith("2 chats kept, ")

    dialog.clear_states.click()
    # The click returned while the service is still at work: the UI thread never waits.
    assert dialog.states_note.text() == "Freeing…" and not dialog.clear_states.isEnabled()
    run(loop, until(lambda: model.calls == 1, what="the service asked"))
    assert all(p.exists() for p in paths)
    model.go_on.set()
    run(loop, until(lambda: dialog.clear_states.isEnabled(), what="the clear to finish"))
    assert dialog.states_note.text() == f"Freed {_human(size)} (2 chats)"
    assert not any(p.exists() for p in paths) and kv_cache.usage() == (0, 0)

    dialog.clear_states.click()
    run(loop, until(lambda: dialog.clear_states.isEnabled(), what="the second clear"))
    assert dialog.states_note.text() == "Nothing was kept" and model.calls == 2


def test_the_windows_settings_clear_the_states_through_the_engine(make_window, loop, monkeypatch) -> None:
    window = make_window()
    paths = _saved_states(3)
    notes: list[str] = []

    def accept(dialog: SettingsDialog) -> int:
        dialog.clear_states.click()
        run(loop, until(lambda: dialog.states_note.text().startswith("Freed"), what="the clear"))
        notes.append(dialog.states_note.text())
        dialog.prompt_lookup.setCurrentIndex(dialog.prompt_lookup.findData("off"))
        return 1

    monkeypatch.setattr(SettingsDialog, "exec", accept)
    window.edit_settings()
    run(loop, until(lambda: window.doors.settings.settings.prompt_lookup == "off", what="the saved settings"))
    assert notes and notes[0].startswith("Freed ") and notes[0].endswith(" (3 chats)")
    assert not any(p.exists() for p in paths)
    assert service_of(window).session.client.prompt_lookup == "off"  # the next answers draft no more


def _human(size: int) -> str:
    from app.core.units import human_size

    return human_size(size)


def test_while_quick_ask_keeps_the_model_ready_the_idle_unload_says_it_does_not_apply(qtbot) -> None:
    from app.ui.settings.dialogs import KEPT_READY_WORDS

    settings = dataclasses.replace(Settings(), unload_after_minutes=20.0)
    dialog = SettingsDialog(settings, None)
    qtbot.addWidget(dialog)
    assert settings.quick_ask.enabled and settings.quick_ask.keep_model_ready  # the defaults
    assert not dialog.unload_after.isEnabled() and not dialog.exit_engine.isEnabled()
    assert dialog.unload_after.toolTip() == KEPT_READY_WORDS
    dialog.quick_ask.keep_model_ready.setChecked(False)
    assert dialog.unload_after.isEnabled() and dialog.exit_engine.isEnabled()
    assert dialog.value().unload_after_minutes == 20.0, "the value is kept either way"
    dialog.quick_ask.keep_model_ready.setChecked(True)
    dialog.quick_ask.enabled.setChecked(False)
    assert dialog.unload_after.isEnabled(), "quick ask off: the model is unloaded when idle again"
