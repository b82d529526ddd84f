"""The Settings dialog's Quick ask page: each control round-trips to settings.json, the key field takes one chord
holding Ctrl, Alt or the Windows key (and refuses others with words), starting at sign-in writes the real
autostart file off the UI thread and says a refusal on the page, Cancel puts the entry back, and the page says
what keeping the model loaded costs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.core import autostart
from app.core.autostart import XdgAutostartFile
from app.core.paths import data_paths
from app.core.quick_ask_settings import QuickAskSettings
from app.core.settings import Settings
from app.core.units import human_size
from app.library.installed import InstalledModel
from app.ui.settings.dialogs import SettingsDialog
from app.ui.settings.quick_ask_settings_page import QuickAskSettingsPage, ready_cost_words
from app.ui.state.model_items import InstalledModelsModel
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import run, until


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The XDG config folder the autostart file goes in, for this test alone (never the real one)."""
    folder = tmp_path / "xdg config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    monkeypatch.setattr(autostart.sys, "platform", "linux")
    return folder


def _page(qtbot, settings: Settings = Settings(), **options) -> QuickAskSettingsPage:
    page = QuickAskSettingsPage(settings, None, **options)
    qtbot.addWidget(page)
    page.show()
    return page


def test_the_page_shows_the_settings_and_gives_them_back(qtbot) -> None:
    chosen = Settings(quick_ask=QuickAskSettings(enabled=True, shortcut="Meta+K", save_chats=False,
                                                 keep_model_ready=False), start_at_sign_in=True)
    page = _page(qtbot, chosen)
    assert page.enabled.isChecked() and page.shortcut_text() == "Meta+K"
    assert page.shortcut.keySequence().toString() == "Meta+K"
    assert not page.save_chats.isChecked() and not page.keep_model_ready.isChecked()
    assert page.start_at_sign_in.isChecked()
    assert page.value(Settings()) == chosen
    page.enabled.setChecked(False)
    assert not page.shortcut.isEnabled() and not page.keep_model_ready.isEnabled()  # nothing to set while off
    assert page.value(chosen).quick_ask.enabled is False


def test_the_key_field_takes_one_chord_and_refuses_one_without_a_modifier_in_words(qtbot) -> None:
    page = _page(qtbot)
    assert page.shortcut_text() == "Ctrl+Alt+Space"
    qtbot.keyClick(page.shortcut, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert page.shortcut_text() == "Ctrl+Shift+K" and not page.shortcut_problem.isVisible()

    qtbot.keyClick(page.shortcut, Qt.Key.Key_F5)
    assert page.shortcut_problem.isVisible()
    words = page.shortcut_problem.text.text()
    assert words.startswith("Not changed: ") and "has no Ctrl, Alt or Windows key" in words
    assert page.shortcut_text() == "Ctrl+Shift+K"  # the last good one is kept, and shown
    assert page.shortcut.keySequence().toString(page.shortcut.keySequence().SequenceFormat.PortableText) == (
        "Ctrl+Shift+K")
    qtbot.keyClick(page.shortcut, Qt.Key.Key_A, Qt.KeyboardModifier.ShiftModifier)
    assert page.shortcut_text() == "Ctrl+Shift+K" and "has no Ctrl, Alt or Windows key" in (
        page.shortcut_problem.text.text())
    assert page.value(Settings()).quick_ask.shortcut == "Ctrl+Shift+K"


def test_clear_and_reset(qtbot) -> None:
    page = _page(qtbot, Settings(quick_ask=QuickAskSettings(shortcut="Alt+Q")))
    page.clear_shortcut.click()
    assert page.shortcut_text() == "" and page.shortcut.keySequence().isEmpty()
    assert "kestrel ask" in page.shortcut_problem.text.text()  # what still opens it
    assert page.value(Settings()).quick_ask.shortcut == ""
    page.reset_shortcut.click()
    assert page.reset_shortcut.text() == "&Reset to Ctrl+Alt+Space"
    assert page.shortcut_text() == "Ctrl+Alt+Space" and not page.shortcut_problem.isVisible()


def test_the_shortcuts_state_is_shown_as_the_window_gives_it(qtbot) -> None:
    page = _page(qtbot)
    assert not page.shortcut_status.isVisible() and not page.shortcut_warning.isVisible()
    page.show_shortcut_status(True, "Ctrl+Alt+Space opens quick ask from any program.")
    assert page.shortcut_status.isVisible() and "from any program" in page.shortcut_status.text()
    page.show_shortcut_status(False, "Another program already uses Ctrl+Alt+Space: pick other keys.")
    assert page.shortcut_warning.isVisible() and not page.shortcut_status.isVisible()
    assert "Another program" in page.shortcut_warning.text.text()


def test_starting_at_sign_in_writes_the_file_off_the_ui_thread_and_removes_it(qtbot, loop, tmp_path: Path) -> None:
    entry = XdgAutostartFile(tmp_path / "autostart" / "kestrel.desktop")
    page = _page(qtbot, spawn=loop.create_task, sign_in=entry)
    page.start_at_sign_in.setChecked(True)
    assert not page.start_at_sign_in.isEnabled()  # until the worker thread is done
    run(loop, until(lambda: page.start_at_sign_in.isEnabled(), what="the autostart file"))
    assert entry.enabled() and "--background" in entry.path.read_text(encoding="utf-8")
    assert page.sign_in_note.text() == "Kestrel will start in the tray when you sign in."
    page.start_at_sign_in.setChecked(False)
    run(loop, until(lambda: page.start_at_sign_in.isEnabled(), what="the removal"))
    assert not entry.path.exists() and page.sign_in_note.text() == "Kestrel will not start when you sign in."


def test_a_refusal_is_said_on_the_page_and_the_box_goes_back(qtbot, loop, tmp_path: Path) -> None:
    (tmp_path / "autostart").write_text("a file where the folder should be", encoding="utf-8")
    entry = XdgAutostartFile(tmp_path / "autostart" / "kestrel.desktop")
    page = _page(qtbot, spawn=loop.create_task, sign_in=entry)
    page.start_at_sign_in.setChecked(True)
    run(loop, until(lambda: page.start_at_sign_in.isEnabled(), what="the refusal"))
    assert not page.start_at_sign_in.isChecked() and page.sign_in_warning.isVisible()
    words = page.sign_in_warning.text.text()
    assert str(entry.path) in words and "will not start when you sign in" in words
    assert page.value(Settings()).start_at_sign_in is False


def test_cancel_puts_the_entry_back_as_it_was(qtbot, loop, config_home: Path) -> None:
    class Adapter:
        """The window's adapter as the dialog uses it: its spawn and its (empty) list of models."""

        def __init__(self) -> None:
            self.installed = InstalledModelsModel()

        def spawn(self, coroutine):
            return loop.create_task(coroutine)

    written = config_home / "autostart" / "kestrel.desktop"
    dialog = SettingsDialog(Settings(), None, adapter=Adapter())
    qtbot.addWidget(dialog)
    dialog.quick_ask.start_at_sign_in.setChecked(True)
    run(loop, until(written.exists, what="the autostart file"))
    dialog.reject()
    run(loop, until(lambda: not written.exists(), what="the entry put back"))


def test_what_keeping_the_model_loaded_costs_from_its_file_when_no_estimate_is_known() -> None:
    model = InstalledModel(id="qwen", title="Qwen2.5 Coder 0.5B", path=Path("/m/q.gguf"), size=491_400_000,
                           sha256=None, source="", added=0.0, format="gguf")
    assert ready_cost_words((), model) == ("Qwen2.5 Coder 0.5B takes about 491.4 MB of memory (its file's size), "
                                           "which stays in use while Kestrel waits.")
    assert ready_cost_words((), None) == "The model you use stays in memory while Kestrel waits."


def test_every_control_round_trips_through_settings_json(make_window, loop, monkeypatch, config_home: Path) -> None:
    window = make_window(engine=ScriptedEngine())
    seen: list[str] = []

    def accept(dialog: SettingsDialog) -> int:
        page = dialog.quick_ask
        seen.append(page.memory_note.text())
        page.enabled.setChecked(False)
        page.enabled.setChecked(True)
        QTest.keyClick(page.shortcut, Qt.Key.Key_J, Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.MetaModifier)
        page.save_chats.setChecked(False)
        page.keep_model_ready.setChecked(False)
        page.start_at_sign_in.setChecked(True)
        run(loop, until(lambda: page.start_at_sign_in.isEnabled(), what="the autostart file"))
        return 1

    monkeypatch.setattr(SettingsDialog, "exec", accept)
    window.edit_settings()
    settings_file = data_paths().settings_file
    # The file is written before the service's value follows it (SettingsKeeper.save): wait for both, as
    # the dialog opened again below reads the service's value.
    run(loop, until(lambda: settings_file.exists() and json.loads(settings_file.read_text(encoding="utf-8"))
                    .get("start_at_sign_in") is True and window.doors.settings.settings.start_at_sign_in,
                    what="the saved settings"))
    on_disk = json.loads(settings_file.read_text(encoding="utf-8"))
    assert on_disk["quick_ask"] == {"enabled": True, "shortcut": "Meta+Alt+J", "save_chats": False,
                                    "keep_model_ready": False}
    assert (config_home / "autostart" / "kestrel.desktop").exists()
    model = window.doors.model.model
    # The models not listed yet (the model manager lists them): the loaded one's file size.
    assert seen[0] == (f"{model.title} takes about {human_size(model.size)} of memory (its file's size), "
                       "which stays in use while Kestrel waits.")

    # Opened again, the page shows what was saved; unchanged, it gives the same settings back. The models
    # listed now, it says the loaded model's memory as the library estimates it.
    run(loop, window.doors.library.refresh())
    (row,) = [r for r in window.adapter.installed.rows() if r.is_loaded]
    shown = SettingsDialog(window.doors.settings.settings, window, adapter=window.adapter, model=window.doors.model)
    page = shown.quick_ask
    assert page.memory_note.text() == (f"{model.title} takes about {human_size(row.fit.need.total)} of memory, "
                                       "which stays in use while Kestrel waits.")
    assert (page.shortcut_text(), page.save_chats.isChecked(), page.keep_model_ready.isChecked(),
            page.start_at_sign_in.isChecked()) == ("Meta+Alt+J", False, False, True)
    assert shown.value() == window.doors.settings.settings
    shown.deleteLater()


def test_the_page_shows_all_of_its_words_with_every_warning_up(qtbot) -> None:
    """The clip test (tests/ui/test_no_clipped_text.py) sees the page as it opens; this sees it with every
    line of words it can show, the longest a refusal says."""
    from tests.helpers.clip_probe import clipped

    dialog = SettingsDialog(Settings(), None)
    qtbot.addWidget(dialog)
    dialog.show_page("quick_ask")
    assert dialog.tabs.tabText(dialog.tabs.currentIndex()) == "&Quick ask"
    dialog.show()
    page = dialog.quick_ask
    qtbot.keyClick(page.shortcut, Qt.Key.Key_F5)
    page.show_shortcut_status(False, "Another program already holds Ctrl+Alt+Space, so quick ask cannot use it. "
                                     "Press other keys above, or bind “kestrel ask” in your desktop's settings.")
    page._say_sign_in("Kestrel could not write /home/jürgen/.config/autostart/kestrel.desktop (Read-only file "
                      "system), so it will not start when you sign in. Check that you can write to the folder "
                      "/home/jürgen/.config/autostart, then turn \"Start Kestrel when I sign in\" on again.", True)
    assert page.shortcut_problem.isVisible() and page.shortcut_warning.isVisible() and page.sign_in_warning.isVisible()
    qtbot.waitUntil(lambda: not clipped(dialog))
