"""The Windows global shortcut (RegisterHotKey + a native event filter) on a fake user32.

The fake follows Microsoft's documented behaviour of RegisterHotKey, UnregisterHotKey and WM_HOTKEY
(learn.microsoft.com, winuser.h): a combination already registered, by any thread or program, fails
with ERROR_HOTKEY_ALREADY_REGISTERED (1409); unregistering frees it; WM_HOTKEY (0x0312) carries the
hotkey id in wParam. It is written from that documentation, NOT recorded on a real machine, and this
path is untested on a real Windows desktop.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

import pytest
from PySide6.QtCore import QByteArray

from app.ui.quick_ask.shortcuts.key_sequence import MOD_ALT, MOD_CONTROL, MOD_NOREPEAT, MOD_SHIFT, MOD_WIN
from app.ui.quick_ask.shortcuts.shortcut import ShortcutStatus
from app.ui.quick_ask.shortcuts.windows_hotkey import MSG, WM_HOTKEY, WindowsHotKey


@dataclass
class FakeUser32:
    """A desktop's hotkey table as user32 keeps it, shared by every 'program' holding this fake."""

    taken: dict[tuple[int, int], int] = field(default_factory=dict)  # (modifiers without NOREPEAT, vk) -> id
    calls: list[tuple[object, ...]] = field(default_factory=list)
    last_error: int = 0

    def RegisterHotKey(self, hwnd: int | None, hotkey_id: int, modifiers: int, virtual_key: int) -> bool:
        self.calls.append(("RegisterHotKey", hwnd, hotkey_id, modifiers, virtual_key))
        combination = (modifiers & ~MOD_NOREPEAT, virtual_key)
        if combination in self.taken:
            self.last_error = 1409
            return False
        self.taken[combination] = hotkey_id
        return True

    def UnregisterHotKey(self, hwnd: int | None, hotkey_id: int) -> bool:
        self.calls.append(("UnregisterHotKey", hwnd, hotkey_id))
        for combination, held in list(self.taken.items()):
            if held == hotkey_id:
                del self.taken[combination]
                return True
        self.last_error = 1419  # ERROR_HOTKEY_NOT_REGISTERED
        return False

    def GetLastError(self) -> int:
        return self.last_error

    def press(self, modifiers: int, virtual_key: int) -> MSG | None:
        """The WM_HOTKEY Windows would post for a press of these keys, if anyone holds them."""
        hotkey_id = self.taken.get((modifiers, virtual_key))
        if hotkey_id is None:
            return None
        return MSG(None, WM_HOTKEY, hotkey_id, (virtual_key << 16) | modifiers, 0, 0, 0)


def deliver(shortcut: WindowsHotKey, msg: MSG | None) -> bool:
    """Hand a message to the shortcut's native filter as Qt's Windows dispatcher does."""
    if msg is None:
        return False
    answer = shortcut.event_filter.nativeEventFilter(QByteArray(b"windows_generic_MSG"), ctypes.addressof(msg))
    assert isinstance(answer, tuple)
    return bool(answer[0])


@pytest.fixture
def user32() -> FakeUser32:
    return FakeUser32()


def test_bind_registers_the_combination_and_wm_hotkey_activates(qtbot, user32: FakeUser32) -> None:
    shortcut = WindowsHotKey(user32=user32)
    with qtbot.waitSignal(shortcut.statusChanged) as blocker:
        shortcut.bind("Ctrl+Alt+Space")
    assert blocker.args == [ShortcutStatus(True, "Ctrl+Alt+Space opens quick ask from any program.")]
    assert user32.calls == [("RegisterHotKey", None, shortcut.hotkey_id, MOD_CONTROL | MOD_ALT | MOD_NOREPEAT, 0x20)]
    with qtbot.waitSignal(shortcut.activated, timeout=1000):
        assert deliver(shortcut, user32.press(MOD_CONTROL | MOD_ALT, 0x20))


def test_other_messages_pass_through(qtbot, user32: FakeUser32) -> None:
    shortcut = WindowsHotKey(user32=user32)
    shortcut.bind("Meta+K")
    assert user32.calls[-1][3:] == (MOD_WIN | MOD_NOREPEAT, ord("K"))
    other_id = MSG(None, WM_HOTKEY, shortcut.hotkey_id + 100, 0, 0, 0, 0)
    not_hotkey = MSG(None, 0x0100, shortcut.hotkey_id, 0, 0, 0, 0)  # WM_KEYDOWN
    with qtbot.assertNotEmitted(shortcut.activated, wait=100):
        assert not deliver(shortcut, other_id)
        assert not deliver(shortcut, not_hotkey)


def test_a_combination_another_program_holds_gives_words(qtbot, user32: FakeUser32) -> None:
    other_program = WindowsHotKey(user32=user32)
    other_program.bind("Ctrl+Shift+F12")
    shortcut = WindowsHotKey(user32=user32)
    shortcut.bind("Ctrl+Shift+F12")
    assert user32.calls[-1] == ("RegisterHotKey", None, shortcut.hotkey_id, MOD_CONTROL | MOD_SHIFT | MOD_NOREPEAT, 0x7B)
    assert shortcut.status == ShortcutStatus(
        False, "Ctrl+Shift+F12 is already used by another program: choose another shortcut in Settings → Quick ask.",
        taken=True)


def test_release_unregisters_and_the_key_no_longer_fires(qtbot, user32: FakeUser32) -> None:
    shortcut = WindowsHotKey(user32=user32)
    shortcut.bind("Ctrl+Alt+Space")
    stale = user32.press(MOD_CONTROL | MOD_ALT, 0x20)  # posted before the release, read after it
    shortcut.release()
    assert user32.calls[-1] == ("UnregisterHotKey", None, shortcut.hotkey_id)
    assert user32.taken == {}
    assert shortcut.status.held is False
    with qtbot.assertNotEmitted(shortcut.activated, wait=100):
        deliver(shortcut, stale)


def test_rebinding_unregisters_the_old_combination_first(user32: FakeUser32) -> None:
    shortcut = WindowsHotKey(user32=user32)
    shortcut.bind("Ctrl+Alt+Space")
    shortcut.bind("Ctrl+Alt+K")
    assert [call[0] for call in user32.calls] == ["RegisterHotKey", "UnregisterHotKey", "RegisterHotKey"]
    assert user32.taken == {(MOD_CONTROL | MOD_ALT, ord("K")): shortcut.hotkey_id}


def test_a_sequence_that_cannot_be_global_registers_nothing(user32: FakeUser32) -> None:
    shortcut = WindowsHotKey(user32=user32)
    shortcut.bind("Ctrl+Alt+Space, K")
    assert user32.calls == []
    assert shortcut.status.held is False and "several presses" in shortcut.status.words
