"""The engine process's OS priority: normal while watched, lower when running gently.

On Windows psutil sets the process's priority class (below normal when gentle), which
covers all its threads and can be set back. On Linux and macOS the nice value belongs
to each thread, so every thread of the engine is set (llama.cpp's workers were started
before); and an unprivileged process may raise a nice value but not lower it again
(unless RLIMIT_NICE allows), so going back to full speed can be refused: the engine then
stays gentle, which the status of set_gentle() says. On Windows, Efficiency mode (EcoQoS) is a separate switch: the OS may turn
it on for a process it thinks is in the background, which users of other local-AI apps
report makes answers several times slower. So Kestrel sets it itself, on when gentle
and explicitly off at full speed. The Windows call lives in small functions behind a
platform check; on Windows 10 (no such API) and anywhere else it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable

import psutil

# A nice value that yields to what the user is doing without starving the engine.
GENTLE_NICE = 10

# processthreadsapi.h
PROCESS_SET_INFORMATION = 0x0200
PROCESS_POWER_THROTTLING_CURRENT_VERSION = 1
PROCESS_POWER_THROTTLING_EXECUTION_SPEED = 0x1
PROCESS_INFORMATION_CLASS_POWER_THROTTLING = 4  # ProcessPowerThrottling


class _PowerThrottlingState(ctypes.Structure):
    _fields_ = [("Version", ctypes.c_ulong), ("ControlMask", ctypes.c_ulong), ("StateMask", ctypes.c_ulong)]


def set_gentle(pid: int, gentle: bool, *, eco_qos: Callable[[int, bool], bool] | None = None) -> str | None:
    """Lower (gentle) or restore the priority of process pid; returns a problem in words,
    or None. Never raises: a process that ended or a missing API is not the user's
    problem, and the answer goes on at whatever priority it has."""
    problem = _set_priority(pid, gentle)
    if sys.platform == "win32" or eco_qos is not None:
        if not (eco_qos or windows_eco_qos)(pid, gentle):
            problem = problem or "Windows did not take the Efficiency mode setting (Windows 10 has none)."
    return problem


def _set_priority(pid: int, gentle: bool) -> str | None:
    try:
        process = psutil.Process(pid)
        if sys.platform == "win32":
            process.nice(psutil.BELOW_NORMAL_PRIORITY_CLASS if gentle else psutil.NORMAL_PRIORITY_CLASS)
        else:
            for thread in process.threads():
                os.setpriority(os.PRIO_PROCESS, thread.id, GENTLE_NICE if gentle else 0)
    except (psutil.NoSuchProcess, ProcessLookupError):
        return None  # The engine ended meanwhile; the next one starts at normal priority.
    except (psutil.AccessDenied, PermissionError) as exc:
        if gentle:
            return f"The engine's priority could not be lowered ({exc})."
        return ("The engine could not be given its normal priority back: this system lets a program "
                "lower a priority but not raise it again. Answers run gently until the model is loaded again.")
    except OSError as exc:
        return f"The engine's priority could not be changed ({exc})."
    return None


def windows_eco_qos(pid: int, on: bool) -> bool:
    """Turn Efficiency mode on or off for process pid; False if Windows refused or lacks it."""
    kernel32 = _kernel32()
    if kernel32 is None or not hasattr(kernel32, "SetProcessInformation"):
        return False  # Windows 10 before 1709, or not Windows
    handle = kernel32.OpenProcess(PROCESS_SET_INFORMATION, False, pid)
    if not handle:
        return False
    try:
        state = eco_qos_state(on)
        return bool(kernel32.SetProcessInformation(handle, PROCESS_INFORMATION_CLASS_POWER_THROTTLING,
                                                   ctypes.byref(state), ctypes.sizeof(state)))
    finally:
        kernel32.CloseHandle(handle)


def eco_qos_state(on: bool) -> _PowerThrottlingState:
    """The structure SetProcessInformation takes: the mask says Kestrel decides execution
    speed throttling, the state turns it on (EcoQoS) or off (never throttled)."""
    return _PowerThrottlingState(PROCESS_POWER_THROTTLING_CURRENT_VERSION, PROCESS_POWER_THROTTLING_EXECUTION_SPEED,
                                 PROCESS_POWER_THROTTLING_EXECUTION_SPEED if on else 0)


def _kernel32() -> ctypes.CDLL | None:
    if sys.platform != "win32":
        return None
    return ctypes.WinDLL("kernel32", use_last_error=True)
