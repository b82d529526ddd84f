"""QuickAskReach and its wiring in the window: the shortcut follows the settings, every way summons the
window, and a shortcut another program holds is said in the main window with where to choose another."""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import QObject

from app.core.quick_ask_settings import QuickAskSettings
from app.ui.app import SHORTCUT_PROBLEM, build_quick_ask
from app.ui.quick_ask.reach import OFF, QuickAskReach
from app.ui.quick_ask.shortcuts.shortcut import NO_DESKTOP_SHORTCUT, GlobalShortcut, ShortcutStatus, held_words, taken_words
from tests.ui.conftest import run, service_of, until


class RecordedShortcut(GlobalShortcut):
    """Kestrel's own GlobalShortcut interface, answering as a platform's does: held, or taken when told."""

    def __init__(self, taken: tuple[str, ...] = (), parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.calls: list[str] = []
        self.taken = taken

    def bind(self, sequence: str) -> None:
        self.calls.append(f"bind {sequence}")
        self._set_status(taken_words(sequence) if sequence in self.taken else held_words(sequence))

    def release(self) -> None:
        self.calls.append("release")
        self._set_status(ShortcutStatus(False, "Quick ask's shortcut is off."))


class Summoned(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.questions: list[str] = []

    def summon(self, question: str = "") -> None:
        self.questions.append(question)


def test_the_shortcut_follows_quick_asks_settings_and_summons_the_window() -> None:
    shortcut, window = RecordedShortcut(), Summoned()
    reach = QuickAskReach(window, shortcut)  # type: ignore[arg-type]
    heard: list[ShortcutStatus] = []
    reach.statusChanged.connect(heard.append)
    settings = QuickAskSettings()
    reach.follow(settings)
    reach.follow(settings)  # unchanged: not bound twice
    reach.follow(dataclasses.replace(settings, shortcut="Ctrl+Shift+K"))
    reach.follow(dataclasses.replace(settings, enabled=False))
    assert shortcut.calls == ["bind Ctrl+Alt+Space", "bind Ctrl+Shift+K", "release"]
    assert [status.held for status in heard] == [True, True, False] and heard[-1] is OFF
    shortcut.activated.emit()
    reach.summon("from kestrel ask")
    assert window.questions == ["", "from kestrel ask"]
    reach.follow(settings)
    reach.follow(dataclasses.replace(settings, shortcut=""))  # no shortcut: `kestrel ask` bound elsewhere
    assert shortcut.calls[-2:] == ["bind Ctrl+Alt+Space", "release"] and reach.status is OFF


def test_a_shortcut_another_program_holds_is_said_in_the_window_and_goes_when_one_is_held(make_window, loop) -> None:
    window = make_window()
    shortcut = RecordedShortcut(taken=("Ctrl+Alt+Space",))
    reach = build_quick_ask(service_of(window), window, shortcut)
    settings = window.doors.settings.settings
    reach.follow(settings.quick_ask)
    assert window.chat.problem_kind == SHORTCUT_PROBLEM
    assert window.chat.banner.text() == taken_words("Ctrl+Alt+Space").words
    assert "choose another shortcut in Settings" in window.chat.banner.text()
    assert not window.shortcut_held and window.shortcut_words == window.chat.banner.text()
    run(loop, window.doors.settings.update_settings(dataclasses.replace(
        settings, quick_ask=dataclasses.replace(settings.quick_ask, shortcut="Ctrl+Shift+K"))))
    run(loop, until(lambda: shortcut.calls[-1] == "bind Ctrl+Shift+K", what="the new shortcut bound"))
    assert window.shortcut_held and window.chat.problem_kind == "" and not window.chat.banner_row.isVisibleTo(window)
    window.tray.askRequested.emit()
    assert reach.window.isVisible(), "the tray's Ask… summons the quick-ask window"
    reach.window.hide()


class NoDesktopShortcut(RecordedShortcut):
    def bind(self, sequence: str) -> None:
        self.calls.append(f"bind {sequence}")
        self._set_status(NO_DESKTOP_SHORTCUT)


def test_a_desktop_without_global_shortcuts_is_said_in_settings_not_in_a_banner_at_every_start(make_window) -> None:
    window = make_window()
    reach = build_quick_ask(service_of(window), window, NoDesktopShortcut())
    reach.follow(window.doors.settings.settings.quick_ask)
    assert window.chat.problem_kind == "" and not window.shortcut_held
    assert window.shortcut_words == NO_DESKTOP_SHORTCUT.words and '"kestrel ask"' in window.shortcut_words


def test_a_taken_shortcut_never_covers_another_problem(make_window) -> None:
    window = make_window()
    window.chat.show_problem("The settings file was damaged and set aside.", "other")
    reach = build_quick_ask(service_of(window), window, RecordedShortcut(taken=("Ctrl+Alt+Space",)))
    reach.follow(window.doors.settings.settings.quick_ask)
    assert window.chat.banner.text() == "The settings file was damaged and set aside."
    assert window.shortcut_words == taken_words("Ctrl+Alt+Space").words, "still said in Settings → Quick ask"
