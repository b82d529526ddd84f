"""The Windows global shortcut: RegisterHotKey on the GUI thread, WM_HOTKEY read by a native event filter.

A hotkey registered with no window belongs to the thread that registered it, and Windows posts its
WM_HOTKEY to that thread's queue, which Qt's event dispatcher hands to native event filters as a
"windows_generic_MSG". So bind() and release() run on the GUI thread, where Qt reads that queue.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Callable, Protocol

from PySide6.QtCore import QAbstractNativeEventFilter, QByteArray, QCoreApplication, QObject

from app.ui.quick_ask.shortcuts.key_sequence import SETTINGS_PLACE, Unusable, windows_combination
from app.ui.quick_ask.shortcuts.shortcut import RELEASED, GlobalShortcut, ShortcutStatus, held_words, taken_words

WM_HOTKEY = 0x0312
ERROR_HOTKEY_ALREADY_REGISTERED = 1409
# An application's hotkey ids are 0x0000–0xBFFF; Kestrel's start here ("KE").
_FIRST_ID = 0x4B45


class User32(Protocol):
    """The three user32 calls a hotkey needs (the real one, or the tests' fake)."""

    def RegisterHotKey(self, hwnd: int | None, hotkey_id: int, modifiers: int, virtual_key: int) -> bool: ...

    def UnregisterHotKey(self, hwnd: int | None, hotkey_id: int) -> bool: ...

    def GetLastError(self) -> int: ...


class MSG(ctypes.Structure):
    """winuser.h's MSG, laid out for this process's pointer size."""

    _fields_ = [
        ("hwnd", ctypes.c_void_p),
        ("message", ctypes.c_uint),
        ("wParam", ctypes.c_size_t),
        ("lParam", ctypes.c_ssize_t),
        ("time", ctypes.c_uint32),
        ("pt_x", ctypes.c_long),
        ("pt_y", ctypes.c_long),
    ]


class WindowsHotKey(GlobalShortcut):
    """A key combination registered with RegisterHotKey for the whole desktop."""

    _next_id = _FIRST_ID

    def __init__(self, parent: QObject | None = None, user32: User32 | None = None) -> None:
        super().__init__(parent)
        self._user32 = user32 if user32 is not None else system_user32()
        self._hotkey_id = WindowsHotKey._next_id
        WindowsHotKey._next_id += 1
        self._registered = False
        self._filter = HotKeyFilter(self._hotkey_id, self._on_hotkey)
        app = QCoreApplication.instance()
        if app is not None:
            app.installNativeEventFilter(self._filter)
        installed = self._filter
        self.destroyed.connect(lambda: _remove_filter(installed))

    @property
    def hotkey_id(self) -> int:
        """The id WM_HOTKEY carries in its wParam for this shortcut."""
        return self._hotkey_id

    @property
    def event_filter(self) -> HotKeyFilter:
        """The native event filter that turns our WM_HOTKEY into activated()."""
        return self._filter

    def bind(self, sequence: str) -> None:
        """Override GlobalShortcut.bind."""
        self._unregister()
        combination = windows_combination(sequence)
        if isinstance(combination, Unusable):
            self._set_status(ShortcutStatus(False, combination.words))
            return
        if self._user32.RegisterHotKey(None, self._hotkey_id, combination.modifiers, combination.virtual_key):
            self._registered = True
            self._set_status(held_words(sequence))
            return
        error = self._user32.GetLastError()
        if error == ERROR_HOTKEY_ALREADY_REGISTERED:
            self._set_status(taken_words(sequence))
        else:
            self._set_status(ShortcutStatus(False, f"Windows refused {sequence} (error {error}): choose another "
                                                   f"shortcut in {SETTINGS_PLACE}."))

    def release(self) -> None:
        """Override GlobalShortcut.release."""
        self._unregister()
        self._set_status(RELEASED)

    def _unregister(self) -> None:
        if self._registered:
            self._user32.UnregisterHotKey(None, self._hotkey_id)
            self._registered = False

    def _on_hotkey(self) -> None:
        if self._registered:
            self.activated.emit()


def _remove_filter(installed: QAbstractNativeEventFilter) -> None:
    """Take a destroyed shortcut's filter out of the application."""
    app = QCoreApplication.instance()
    if app is not None:
        app.removeNativeEventFilter(installed)


class HotKeyFilter(QAbstractNativeEventFilter):
    """Turns a WM_HOTKEY with our id into a call; every other message goes on to Qt."""

    def __init__(self, hotkey_id: int, on_hotkey: Callable[[], None]) -> None:
        super().__init__()
        self._hotkey_id = hotkey_id
        self._on_hotkey = on_hotkey

    def nativeEventFilter(self, eventType: QByteArray | bytes | bytearray | memoryview, message: int,
                          /) -> object:  # noqa: N802
        """Override QAbstractNativeEventFilter.nativeEventFilter: (handled, result)."""
        kind = eventType.data() if isinstance(eventType, QByteArray) else bytes(eventType)
        if kind != b"windows_generic_MSG" or not message:
            return False, 0
        msg = ctypes.cast(int(message), ctypes.POINTER(MSG)).contents
        if msg.message == WM_HOTKEY and msg.wParam == self._hotkey_id:
            self._on_hotkey()
            return True, 0
        return False, 0


def system_user32() -> User32:
    """Windows' own user32; on other systems nothing is registered and bind() says so."""
    if sys.platform == "win32":
        return _Win32User32()
    return _NoUser32()


class _NoUser32:
    """Stands in for user32 where there is none, refusing every registration."""

    def RegisterHotKey(self, hwnd: int | None, hotkey_id: int, modifiers: int, virtual_key: int) -> bool:
        return False

    def UnregisterHotKey(self, hwnd: int | None, hotkey_id: int) -> bool:
        return False

    def GetLastError(self) -> int:
        return 120  # ERROR_CALL_NOT_IMPLEMENTED


if sys.platform == "win32":

    class _Win32User32:
        """user32.dll through ctypes, with the thread's last error kept by ctypes."""

        def __init__(self) -> None:
            from ctypes import wintypes

            self._dll = ctypes.WinDLL("user32", use_last_error=True)
            self._dll.RegisterHotKey.argtypes = [wintypes.HWND, ctypes.c_int, wintypes.UINT, wintypes.UINT]
            self._dll.RegisterHotKey.restype = wintypes.BOOL
            self._dll.UnregisterHotKey.argtypes = [wintypes.HWND, ctypes.c_int]
            self._dll.UnregisterHotKey.restype = wintypes.BOOL

        def RegisterHotKey(self, hwnd: int | None, hotkey_id: int, modifiers: int, virtual_key: int) -> bool:
            return bool(self._dll.RegisterHotKey(hwnd, hotkey_id, modifiers, virtual_key))

        def UnregisterHotKey(self, hwnd: int | None, hotkey_id: int) -> bool:
            return bool(self._dll.UnregisterHotKey(hwnd, hotkey_id))

        def GetLastError(self) -> int:
            return ctypes.get_last_error()
