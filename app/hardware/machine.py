"""Where the probe's sources read the machine from: commands, files and a few Python APIs.

Sources never touch the operating system themselves; they ask a `Machine`. `LiveMachine`
asks the real one. Tests hand the same sources a machine that replays recorded outputs,
so every parser runs on what real tools print.
"""

from __future__ import annotations

import base64
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil

# Enough for a cold PowerShell start plus a WMI query on a slow laptop; a tool that takes
# longer is stuck, and the report goes on without it.
DEFAULT_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Command:
    """A command a source runs. `name` also names its recorded output in test fixtures."""

    name: str
    args: tuple[str, ...]
    timeout_s: float = DEFAULT_TIMEOUT_S
    encoding: str = "utf-8"


class CommandMissing(Exception):
    """The program is not installed (nvidia-smi on a machine without an NVIDIA driver)."""


class CommandFailed(Exception):
    """The program ran but failed, or did not answer in time."""


def powershell(name: str, script: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Command:
    """A Windows PowerShell command whose output is UTF-8 whatever the console's code page.

    The script travels base64-encoded (-EncodedCommand), so no quoting rule of cmd.exe or
    PowerShell can break it, and non-ASCII text in it arrives intact.
    """
    full = "[Console]::OutputEncoding = [System.Text.Encoding]::UTF8\n" + script
    encoded = base64.b64encode(full.encode("utf-16-le")).decode("ascii")
    exe = str(Path(os.environ.get("SystemRoot", r"C:\Windows"), "System32", "WindowsPowerShell",
                   "v1.0", "powershell.exe"))
    args = (exe, "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-EncodedCommand", encoded)
    return Command(name, args, timeout_s)


class Machine(Protocol):
    """What the sources may ask of a machine. Raw answers only; the sources parse them."""

    def platform(self) -> dict[str, str]:
        """system, release, version, machine (and mac_version on macOS), as the platform module says."""

    def run(self, command: Command) -> str:
        """The command's standard output; raises CommandMissing or CommandFailed."""

    def read_text(self, path: str) -> str:
        """A text file such as /proc/cpuinfo; raises OSError."""

    def list_dir(self, path: str) -> list[str]:
        """The names in a folder such as /sys/class/drm; raises OSError."""

    def psutil_facts(self) -> dict[str, Any]:
        """CPU counts, RAM and battery as psutil reports them."""

    def windows_power_status(self) -> dict[str, int]:
        """GetSystemPowerStatus: ac_line_status, battery_flag, battery_percent, system_status_flag."""

    def windows_processor_features(self) -> dict[str, bool]:
        """IsProcessorFeaturePresent for the instruction sets llama.cpp uses."""

    def onnxruntime(self, allow_downloads: bool) -> dict[str, Any]:
        """ONNX Runtime's version, providers and EP devices, after Windows ML registration."""

    def llama(self) -> dict[str, Any]:
        """What the installed llama.cpp offers: offload support, backends, devices, libraries."""


# IsProcessorFeaturePresent ids, from winnt.h.
_WINDOWS_FEATURES = {
    "SSE3": 13, "NEON": 19, "SSSE3": 36, "SSE4_1": 37, "SSE4_2": 38, "AVX": 39, "AVX2": 40,
    "AVX512F": 41, "DOTPROD": 43, "SVE": 46,
}


class LiveMachine:
    """The machine this process runs on."""

    def platform(self) -> dict[str, str]:
        facts = {"system": platform.system(), "release": platform.release(),
                 "version": platform.version(), "machine": platform.machine()}
        if facts["system"] == "Darwin":
            facts["mac_version"] = platform.mac_ver()[0]  # release is Darwin's kernel version
        return facts

    def run(self, command: Command) -> str:
        return run_command(command)

    def read_text(self, path: str) -> str:
        return Path(path).read_text(encoding="utf-8", errors="replace")

    def list_dir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def psutil_facts(self) -> dict[str, Any]:
        memory = psutil.virtual_memory()
        battery = psutil.sensors_battery() if hasattr(psutil, "sensors_battery") else None
        return {
            "cpu_count_physical": psutil.cpu_count(logical=False),
            "cpu_count_logical": psutil.cpu_count(logical=True),
            "ram_total": memory.total,
            "ram_available": memory.available,
            "battery": None if battery is None else {
                "percent": battery.percent, "power_plugged": battery.power_plugged,
            },
        }

    def windows_power_status(self) -> dict[str, int]:
        return _windows_power_status()

    def windows_processor_features(self) -> dict[str, bool]:
        if sys.platform != "win32":
            raise OSError("IsProcessorFeaturePresent exists only on Windows")
        import ctypes

        present = ctypes.windll.kernel32.IsProcessorFeaturePresent
        return {name: bool(present(number)) for name, number in _WINDOWS_FEATURES.items()}

    def onnxruntime(self, allow_downloads: bool) -> dict[str, Any]:
        from app.hardware.onnx_source import gather_onnxruntime

        return gather_onnxruntime(self.platform(), allow_downloads)

    def llama(self) -> dict[str, Any]:
        from app.hardware.llama_source import gather_llama

        return gather_llama()


def run_command(command: Command) -> str:
    """Run without a shell, without a window, with a timeout; decode the output."""
    # A console program started from the windowed app would flash a console window.
    flags = getattr(subprocess, "CREATE_NO_WINDOW", 0) if sys.platform == "win32" else 0
    try:
        done = subprocess.run(list(command.args), capture_output=True, stdin=subprocess.DEVNULL,
                              timeout=command.timeout_s, creationflags=flags, check=False)
    except FileNotFoundError as exc:
        raise CommandMissing(f"{Path(command.args[0]).name} is not installed") from exc
    except subprocess.TimeoutExpired as exc:
        raise CommandFailed(f"{Path(command.args[0]).name} did not answer within "
                            f"{command.timeout_s:g} s") from exc
    except OSError as exc:
        raise CommandFailed(f"{Path(command.args[0]).name} could not start: {exc}") from exc
    if done.returncode != 0:
        detail = done.stderr.decode(command.encoding, errors="replace").strip().splitlines()
        tail = detail[-1] if detail else "no message"
        raise CommandFailed(f"{Path(command.args[0]).name} exited with status {done.returncode}: {tail}")
    return done.stdout.decode(command.encoding, errors="replace")


def _windows_power_status() -> dict[str, int]:
    # Checked here rather than in the caller so that type checkers, which follow
    # sys.platform tests, read what follows as Windows-only code.
    if sys.platform != "win32":
        raise OSError("GetSystemPowerStatus exists only on Windows")
    import ctypes
    from ctypes import wintypes

    class SystemPowerStatus(ctypes.Structure):
        _fields_ = [
            ("ACLineStatus", wintypes.BYTE), ("BatteryFlag", wintypes.BYTE),
            ("BatteryLifePercent", wintypes.BYTE), ("SystemStatusFlag", wintypes.BYTE),
            ("BatteryLifeTime", wintypes.DWORD), ("BatteryFullLifeTime", wintypes.DWORD),
        ]

    status = SystemPowerStatus()
    if not ctypes.windll.kernel32.GetSystemPowerStatus(ctypes.byref(status)):
        raise OSError(f"GetSystemPowerStatus failed (error {ctypes.GetLastError()})")
    # BYTE is signed in ctypes; the API's values are unsigned (255 means unknown).
    return {"ac_line_status": status.ACLineStatus & 0xFF, "battery_flag": status.BatteryFlag & 0xFF,
            "battery_percent": status.BatteryLifePercent & 0xFF,
            "system_status_flag": status.SystemStatusFlag & 0xFF}
