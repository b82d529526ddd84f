"""Qt key-sequence text read into each platform's modifiers and key, and the words for the unusable."""

from __future__ import annotations

import pytest

from app.ui.quick_ask.shortcuts import NoGlobalShortcut, ShortcutStatus, global_shortcut
from app.ui.quick_ask.shortcuts.key_sequence import (
    MOD_ALT,
    MOD_CONTROL,
    MOD_NOREPEAT,
    MOD_SHIFT,
    MOD_WIN,
    Unusable,
    WindowsCombination,
    X11Combination,
    chord,
    portal_trigger,
    windows_combination,
    x11_combination,
)
from app.ui.quick_ask.shortcuts.portal import PortalShortcut
from app.ui.quick_ask.shortcuts.x11_grab import X11KeyGrab

CTRL, SHIFT, ALT, SUPER = 0x04, 0x01, 0x08, 0x40

# Qt PortableText -> (X11 mask, keysym), (Windows MOD_*, VK), the shortcuts spec's trigger.
USABLE = [
    ("Ctrl+Alt+Space", (CTRL | ALT, 0x20), (MOD_CONTROL | MOD_ALT, 0x20), "CTRL+ALT+space"),
    ("Meta+K", (SUPER, 0x6B), (MOD_WIN, 0x4B), "LOGO+k"),
    ("Ctrl+Shift+F12", (CTRL | SHIFT, 0xFFC9), (MOD_CONTROL | MOD_SHIFT, 0x7B), "CTRL+SHIFT+F12"),
    ("Alt+Shift+1", (ALT | SHIFT, 0x31), (MOD_ALT | MOD_SHIFT, 0x31), "SHIFT+ALT+1"),
    ("Ctrl+PgDown", (CTRL, 0xFF56), (MOD_CONTROL, 0x22), "CTRL+Next"),
    ("Ctrl+Alt+/", (CTRL | ALT, 0x2F), (MOD_CONTROL | MOD_ALT, 0xBF), "CTRL+ALT+slash"),
    ("Ctrl+Alt+Return", (CTRL | ALT, 0xFF0D), (MOD_CONTROL | MOD_ALT, 0x0D), "CTRL+ALT+Return"),
    ("Ctrl+F1", (CTRL, 0xFFBE), (MOD_CONTROL, 0x70), "CTRL+F1"),
    ("Meta+F24", (SUPER, 0xFFD5), (MOD_WIN, 0x87), "LOGO+F24"),
    (" Ctrl+Alt+Esc ", (CTRL | ALT, 0xFF1B), (MOD_CONTROL | MOD_ALT, 0x1B), "CTRL+ALT+Escape"),
]


@pytest.mark.parametrize(("sequence", "x11", "windows", "trigger"), USABLE)
def test_each_platform_reads_the_same_chord(sequence: str, x11: tuple[int, int], windows: tuple[int, int],
                                            trigger: str) -> None:
    assert x11_combination(sequence) == X11Combination(*x11)
    assert windows_combination(sequence) == WindowsCombination(windows[0] | MOD_NOREPEAT, windows[1])
    assert portal_trigger(sequence) == trigger


UNUSABLE = [
    ("", "No shortcut is set: press the keys you want in Settings → Quick ask."),
    ("K", "K has no Ctrl, Alt or Meta key: a global shortcut needs one, or it would take that key from every "
          "program. Choose another in Settings → Quick ask."),
    ("Shift+K", "Shift+K has no Ctrl, Alt or Meta key"),
    ("F5", "F5 has no Ctrl, Alt or Meta key"),
    ("Ctrl+K, Ctrl+L", "Ctrl+K, Ctrl+L is several presses one after another; a global shortcut is one press of "
                       "keys held together, such as Ctrl+Alt+Space. Choose another in Settings → Quick ask."),
    ("Ctrl+Menu", "Kestrel can't listen for Menu from other programs (Ctrl+Menu). Choose a shortcut that ends in "
                  "a letter, a digit, F1–F24, Space or another named key in Settings → Quick ask."),
    ("Ctrl+F25", "Kestrel can't listen for F25 from other programs"),
    ("Ctrl+Num+5", "Kestrel can't listen for Num from other programs"),
    ("Ctrl++", "Kestrel can't listen for + from other programs"),
    ("Hyper+K", "Kestrel can't listen for Hyper from other programs"),
]


@pytest.mark.parametrize(("sequence", "words"), UNUSABLE)
def test_an_unusable_sequence_gets_the_same_words_everywhere(sequence: str, words: str) -> None:
    for read in (chord(sequence), x11_combination(sequence), windows_combination(sequence), portal_trigger(sequence)):
        assert isinstance(read, Unusable)
        assert read.words.startswith(words)


@pytest.mark.parametrize(("environment", "kind"), [
    ({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, PortalShortcut),
    ({"DISPLAY": ":0"}, X11KeyGrab),
    ({}, NoGlobalShortcut),
])
def test_the_desktop_picks_the_shortcut(qtbot, monkeypatch: pytest.MonkeyPatch, environment: dict[str, str],
                                        kind: type) -> None:
    for name in ("WAYLAND_DISPLAY", "DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert type(global_shortcut()) is kind


def test_no_desktop_shortcut_says_how_to_bind_kestrel_ask(qtbot) -> None:
    shortcut = NoGlobalShortcut()
    with qtbot.waitSignal(shortcut.statusChanged) as blocker:
        shortcut.bind("Ctrl+Alt+Space")
    assert blocker.args == [ShortcutStatus(False, (
        "This desktop gives apps no global shortcut. To open quick ask from anywhere, add a shortcut that runs "
        "\"kestrel ask\" in your desktop's own keyboard settings."))]
