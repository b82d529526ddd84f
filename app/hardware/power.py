"""Whether the machine runs on battery, and with battery saver on (Windows)."""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class Power:
    """The machine's power state, as far as the OS tells it."""

    on_battery: bool = False
    saver: bool = False  # battery saver (Windows) is on


class _SystemPowerStatus(ctypes.Structure):
    # winbase.h SYSTEM_POWER_STATUS
    _fields_ = [("ACLineStatus", ctypes.c_ubyte), ("BatteryFlag", ctypes.c_ubyte),
                ("BatteryLifePercent", ctypes.c_ubyte), ("SystemStatusFlag", ctypes.c_ubyte),
                ("BatteryLifeTime", ctypes.c_ulong), ("BatteryFullLifeTime", ctypes.c_ulong)]


def read_power() -> Power:
    """The power state now; unknown parts read as on mains power, saver off."""
    if sys.platform == "win32":
        status = _windows_power_status()
        if status is not None:
            return power_from_status(status.ACLineStatus, status.SystemStatusFlag)
    try:
        battery = psutil.sensors_battery()
    except (OSError, RuntimeError):  # no battery interface (a desktop, a container)
        battery = None
    return Power(on_battery=battery is not None and battery.power_plugged is False)


def power_from_status(ac_line_status: int, system_status_flag: int) -> Power:
    """Windows' GetSystemPowerStatus answer: AC line 0 is battery (1 mains, 255 unknown);
    SystemStatusFlag 1 is battery saver on."""
    return Power(on_battery=ac_line_status == 0, saver=system_status_flag == 1)


def _windows_power_status() -> _SystemPowerStatus | None:
    status = _SystemPowerStatus()
    kernel32 = ctypes.WinDLL("kernel32")  # type: ignore[attr-defined]
    if not kernel32.GetSystemPowerStatus(ctypes.byref(status)):
        return None
    return status
