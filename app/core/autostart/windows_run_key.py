"""Windows: the value "Kestrel" under HKEY_CURRENT_USER's Run key, which Explorer runs at sign-in."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Protocol

from app.core.autostart.failure import AutostartError, reason

RUN_KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"
# Task Manager's Startup tab turns an entry off here, beside the Run value; a value left from
# an earlier "Disable" would keep Kestrel from starting after the person turned it on again.
STARTUP_APPROVED_KEY = r"Software\Microsoft\Windows\CurrentVersion\Explorer\StartupApproved\Run"
VALUE_NAME = "Kestrel"
_WHERE = rf"HKEY_CURRENT_USER\{RUN_KEY}"


class Winreg(Protocol):
    """The part of Python's winreg module this file calls (https://docs.python.org/3/library/winreg.html)."""

    HKEY_CURRENT_USER: int
    KEY_SET_VALUE: int
    KEY_QUERY_VALUE: int
    REG_SZ: int

    def CreateKeyEx(self, key: Any, sub_key: str, reserved: int, access: int) -> Any: ...

    def OpenKey(self, key: Any, sub_key: str, reserved: int, access: int) -> Any: ...

    def SetValueEx(self, key: Any, value_name: str, reserved: int, type: int, value: str) -> None: ...

    def QueryValueEx(self, key: Any, value_name: str) -> tuple[Any, int]: ...

    def DeleteValue(self, key: Any, value: str) -> None: ...


def command_line(command: list[str]) -> str:
    """The Run value for command: the program's path always in quotes (a path with spaces is otherwise
    run as its first word), the arguments as Windows' own parser reads them."""
    program, *arguments = command
    return " ".join([f'"{program}"', *([subprocess.list2cmdline(arguments)] if arguments else [])])


class WindowsRunKey:
    """The Run value, written through winreg (or a stand-in with the same calls)."""

    def __init__(self, winreg: Winreg) -> None:
        self._winreg = winreg

    def enable(self, command: list[str]) -> None:
        self.rewrite(command)
        try:
            self._delete(STARTUP_APPROVED_KEY)
        except OSError as error:
            raise AutostartError(
                f"Kestrel is listed to start when you sign in, but Windows refused to clear an earlier "
                f"\"Disable\" of it ({reason(error)}): turn Kestrel on in Task Manager's Startup apps.") from error

    def rewrite(self, command: list[str]) -> None:
        """The Run value names `command`; a "Disable" the person set in Task Manager stays as it is."""
        reg = self._winreg
        try:
            with reg.CreateKeyEx(reg.HKEY_CURRENT_USER, RUN_KEY, 0, reg.KEY_SET_VALUE) as key:
                reg.SetValueEx(key, VALUE_NAME, 0, reg.REG_SZ, command_line(command))
        except OSError as error:
            raise AutostartError(
                f"Windows refused to write the value {VALUE_NAME} under {_WHERE} ({reason(error)}), so "
                "Kestrel will not start when you sign in. A policy on this PC may block it: put a shortcut "
                "to Kestrel in your Startup folder instead (press Win+R and type shell:startup).") from error

    def disable(self) -> None:
        try:
            self._delete(RUN_KEY)
        except OSError as error:
            raise AutostartError(
                f"Windows refused to remove the value {VALUE_NAME} under {_WHERE} ({reason(error)}), so "
                "Kestrel will still start when you sign in. Turn it off in Task Manager's Startup "
                "apps instead.") from error

    def enabled(self) -> bool:
        reg = self._winreg
        try:
            with reg.OpenKey(reg.HKEY_CURRENT_USER, RUN_KEY, 0, reg.KEY_QUERY_VALUE) as key:
                value, _kind = reg.QueryValueEx(key, VALUE_NAME)
        except FileNotFoundError:
            return False
        except OSError as error:
            raise AutostartError(f"Windows refused to read {_WHERE} ({reason(error)}).") from error
        return isinstance(value, str) and bool(value.strip())

    def _delete(self, sub_key: str) -> None:
        """Remove the value from sub_key; a key or value that is not there is already removed."""
        reg = self._winreg
        try:
            with reg.OpenKey(reg.HKEY_CURRENT_USER, sub_key, 0, reg.KEY_SET_VALUE) as key:
                reg.DeleteValue(key, VALUE_NAME)
        except FileNotFoundError:
            return


def windows_run_key() -> WindowsRunKey:
    """The Run value of this Windows user."""
    if sys.platform != "win32":
        raise RuntimeError("The Run key exists only on Windows.")
    import winreg

    return WindowsRunKey(winreg)
