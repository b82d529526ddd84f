"""The Windows Run value, on a stand-in for Python's winreg module: written, read back, removed, a path with
spaces and "ü" quoted, an earlier Task Manager "Disable" cleared, and a refusal said in words.

FakeWinreg follows winreg's documented behaviour (https://docs.python.org/3/library/winreg.html): OpenKey,
QueryValueEx and DeleteValue raise FileNotFoundError for a missing key or value, an access refusal is
PermissionError ("Access is denied", WinError 5), and key handles are context managers. It is written from
the documentation, not recorded from a real Windows machine; the real path is untested on Windows here."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

import pytest

from app.core import autostart
from app.core.autostart import AutostartError, WindowsRunKey
from app.core.autostart.windows_run_key import RUN_KEY, STARTUP_APPROVED_KEY, command_line


class FakeKey:
    """An open key handle: the path it names and the access it was opened with."""

    def __init__(self, path: str, access: int) -> None:
        self.path, self.access = path, access

    def __enter__(self) -> FakeKey:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        return None


class FakeWinreg:
    """HKEY_CURRENT_USER as a dict of key path → {value name: (data, type)}."""

    HKEY_CURRENT_USER = 0x80000001
    KEY_QUERY_VALUE = 0x0001
    KEY_SET_VALUE = 0x0002
    REG_SZ = 1
    REG_BINARY = 3

    def __init__(self) -> None:
        self.keys: dict[str, dict[str, tuple[Any, int]]] = {}
        self.read_only: set[str] = set()  # keys whose values this user may not change

    def _key(self, root: int, sub_key: str) -> dict[str, tuple[Any, int]]:
        assert root == self.HKEY_CURRENT_USER, "Kestrel writes only its own user's keys"
        if sub_key not in self.keys:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return self.keys[sub_key]

    def CreateKeyEx(self, key: int, sub_key: str, reserved: int, access: int) -> FakeKey:
        assert key == self.HKEY_CURRENT_USER
        self.keys.setdefault(sub_key, {})
        return FakeKey(sub_key, access)

    def OpenKey(self, key: int, sub_key: str, reserved: int, access: int) -> FakeKey:
        self._key(key, sub_key)
        return FakeKey(sub_key, access)

    def SetValueEx(self, key: FakeKey, value_name: str, reserved: int, type: int, value: str) -> None:
        self._may_change(key)
        self.keys[key.path][value_name] = (value, type)

    def QueryValueEx(self, key: FakeKey, value_name: str) -> tuple[Any, int]:
        assert key.access & self.KEY_QUERY_VALUE
        values = self.keys[key.path]
        if value_name not in values:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return values[value_name]

    def DeleteValue(self, key: FakeKey, value: str) -> None:
        self._may_change(key)
        if value not in self.keys[key.path]:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        del self.keys[key.path][value]

    def _may_change(self, key: FakeKey) -> None:
        assert key.access & self.KEY_SET_VALUE, "a value is changed only through a key opened to set values"
        if key.path in self.read_only:
            raise PermissionError(13, "Access is denied")


EXE = r"C:\Users\Jürgen Müller\AppData\Local\Programs\Kestrel\Kestrel.exe"


def test_write_read_back_and_remove() -> None:
    registry = FakeWinreg()
    entry = WindowsRunKey(registry)
    assert entry.enabled() is False
    entry.enable([EXE, "--background"])
    assert registry.keys[RUN_KEY]["Kestrel"] == (f'"{EXE}" --background', FakeWinreg.REG_SZ)
    assert entry.enabled() is True
    entry.disable()
    assert "Kestrel" not in registry.keys[RUN_KEY] and entry.enabled() is False
    entry.disable()  # nothing there: nothing to do


def test_the_program_is_always_quoted_and_arguments_as_windows_reads_them() -> None:
    assert command_line([r"C:\Kestrel\Kestrel.exe", "--background"]) == r'"C:\Kestrel\Kestrel.exe" --background'
    assert command_line([r"C:\Program Files\Python 3\python.exe", "-m", "app", "--background"]) == (
        r'"C:\Program Files\Python 3\python.exe" -m app --background')
    assert command_line([EXE]) == f'"{EXE}"'
    assert command_line(["C:\\k.exe", "two words"]) == '"C:\\k.exe" "two words"'


def test_an_earlier_disable_in_task_manager_is_cleared_and_other_programs_kept() -> None:
    registry = FakeWinreg()
    registry.keys[STARTUP_APPROVED_KEY] = {"Kestrel": (b"\x03" + bytes(11), FakeWinreg.REG_BINARY),
                                           "OneDrive": (b"\x02" + bytes(11), FakeWinreg.REG_BINARY)}
    registry.keys[RUN_KEY] = {"OneDrive": ('"C:\\OneDrive.exe" /background', FakeWinreg.REG_SZ)}
    WindowsRunKey(registry).enable([EXE, "--background"])
    assert set(registry.keys[STARTUP_APPROVED_KEY]) == {"OneDrive"}
    assert set(registry.keys[RUN_KEY]) == {"OneDrive", "Kestrel"}
    WindowsRunKey(registry).disable()
    assert set(registry.keys[RUN_KEY]) == {"OneDrive"}


def test_a_refusal_names_the_key_and_what_to_do() -> None:
    registry = FakeWinreg()
    registry.keys[RUN_KEY] = {}
    registry.read_only.add(RUN_KEY)
    with pytest.raises(AutostartError) as caught:
        WindowsRunKey(registry).enable([EXE, "--background"])
    words = str(caught.value)
    assert rf"HKEY_CURRENT_USER\{RUN_KEY}" in words and "Access is denied" in words
    assert "will not start when you sign in" in words and "shell:startup" in words
    registry.keys[RUN_KEY]["Kestrel"] = ("x", FakeWinreg.REG_SZ)
    with pytest.raises(AutostartError, match="will still start when you sign in.*Task Manager"):
        WindowsRunKey(registry).disable()


def test_enable_on_windows_writes_the_frozen_program(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = FakeWinreg()
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", EXE)
    monkeypatch.setattr(autostart, "windows_run_key", lambda: WindowsRunKey(registry))
    autostart.enable()
    assert registry.keys[RUN_KEY]["Kestrel"][0] == f'"{EXE}" --background'
    assert autostart.enabled() is True


def test_renewing_at_start_follows_a_moved_install_but_keeps_a_disable_set_in_task_manager(
        monkeypatch: pytest.MonkeyPatch) -> None:
    registry = FakeWinreg()
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(autostart, "windows_run_key", lambda: WindowsRunKey(registry))
    moved = "C:\\Users\\Zoë Smith\\AppData\\Local\\Programs\\Kestrel 2\\Kestrel.exe"
    autostart.renew([moved, "--background"])
    assert RUN_KEY not in registry.keys or "Kestrel" not in registry.keys[RUN_KEY], "off stays off"
    autostart.enable([EXE, "--background"])
    disabled = (b"\x03" + bytes(11), FakeWinreg.REG_BINARY)
    registry.keys.setdefault(STARTUP_APPROVED_KEY, {})["Kestrel"] = disabled  # the person's Disable in Task Manager
    autostart.renew([moved, "--background"])
    assert registry.keys[RUN_KEY]["Kestrel"][0] == f'"{moved}" --background', "the entry follows the install"
    assert registry.keys[STARTUP_APPROVED_KEY]["Kestrel"] == disabled, "the person's Disable is kept"
